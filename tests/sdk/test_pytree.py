"""compile_automap: pytree signatures in and out, on the functional model and the host reference."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest
import torch
from mlsdk import (
    AutomapFunction,
    Context,
    InputError,
    MNDevice,
    PytreeStructureError,
    TensorProxy,
    register_pytree_dataclass,
    register_pytree_namedtuple,
    storage,
)
from mlsdk.testing.examples import run_example
from mncore_hdl.paths import repo_root

ROOT = repo_root()
DEVICES = ["mncore2:auto", "pfvm:cpu"]


@register_pytree_namedtuple
class Point(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


@register_pytree_dataclass
@dataclasses.dataclass
class Batch:
    data: torch.Tensor
    bias: torch.Tensor
    mask: torch.Tensor | None = None


@dataclasses.dataclass
class Unregistered:
    data: torch.Tensor


@pytest.fixture(params=DEVICES)
def ctx(request):
    context = Context(MNDevice(request.param))
    yield context
    context.close()


def _t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape) if shape else torch.randn(4, 8)


def _compile(ctx, tmp_path, fn, args, kwargs=None, **compile_kwargs) -> AutomapFunction:
    where = storage.path(tmp_path / getattr(fn, "__name__", "fn"))
    return ctx.compile_automap(fn, args, kwargs, where, **compile_kwargs)


def _cpu(tree):
    return torch.utils._pytree.tree_map(
        lambda leaf: leaf.cpu() if isinstance(leaf, TensorProxy) else leaf, tree)


def _assert_tree_close(got, expected):
    got_leaves, got_spec = torch.utils._pytree.tree_flatten(_cpu(got))
    expected_leaves, expected_spec = torch.utils._pytree.tree_flatten(expected)
    assert got_spec == expected_spec
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
        else:
            assert g == e


# -- structures in and out --------------------------------------------------------------------


def test_tuple_in_tuple_out(ctx, tmp_path, seed):
    def swap(pair):
        return pair[1] * 2, pair[0] + pair[1]

    args = ((_t(), _t()),)
    f = _compile(ctx, tmp_path, swap, args)
    assert list(f.input_specs) == ["args.0.0", "args.0.1"]
    assert list(f.output_specs) == ["out.0", "out.1"]
    out = f(*args)
    assert isinstance(out, tuple) and all(isinstance(o, TensorProxy) for o in out)
    _assert_tree_close(out, swap(*args))


def test_namedtuple_in_and_out(ctx, tmp_path, seed):
    def rotate(p: Point) -> Point:
        return Point(-p.y, p.x)

    args = (Point(_t(), _t()),)
    f = _compile(ctx, tmp_path, rotate, args)
    assert list(f.input_specs) == ["args.0.x", "args.0.y"]
    out = f(*args)
    assert type(out) is Point
    assert out.x.spec.name == "out.x"
    _assert_tree_close(out, rotate(*args))


def test_list_in_list_out(ctx, tmp_path, seed):
    def prefix_sums(xs):
        total, sums = xs[0], [xs[0]]
        for x in xs[1:]:
            total = total + x
            sums.append(total)
        return sums

    args = ([_t(), _t(), _t()],)
    f = _compile(ctx, tmp_path, prefix_sums, args)
    out = f(*args)
    assert isinstance(out, list) and len(out) == 3
    _assert_tree_close(out, prefix_sums(*args))


def test_dicts_positional_and_keyword(ctx, tmp_path, seed):
    def affine(d, *, scale, shift):
        return {"y": d["x"] * scale + shift, "x": d["x"] * 1}

    args, kwargs = ({"x": _t()},), {"scale": _t(), "shift": _t()}
    f = _compile(ctx, tmp_path, affine, args, kwargs)
    assert list(f.input_specs) == ["args.0.x", "kwargs.scale", "kwargs.shift"]
    assert list(f.output_specs) == ["out.y", "out.x"]
    _assert_tree_close(f(*args, **kwargs), affine(*args, **kwargs))
    # Keyword order is not structure.
    _assert_tree_close(f(*args, shift=kwargs["shift"], scale=kwargs["scale"]),
                       affine(*args, **kwargs))


def test_registered_dataclass_in_and_out(ctx, tmp_path, seed):
    def step(batch: Batch) -> Batch:
        return Batch(batch.data + batch.bias, batch.bias * 0.5)

    args = (Batch(_t(), _t()),)
    f = _compile(ctx, tmp_path, step, args)
    # A None field is structure, not an input.
    assert list(f.input_specs) == ["args.0.data", "args.0.bias"]
    out = f(*args)
    assert type(out) is Batch and out.mask is None
    _assert_tree_close(out, step(*args))


def test_nested_structures_and_single_tensor_result(ctx, tmp_path, seed):
    def score(points: list[Point], batch: Batch, extra: dict, weight):
        total = batch.data * weight
        for p in points:
            total = total + p.x * p.y
        return total + extra["a"][0] - extra["a"][1]

    args = ([Point(_t(), _t()), Point(_t(), _t())], Batch(_t(), _t(), _t()),
            {"a": (_t(), _t())}, _t())
    f = _compile(ctx, tmp_path, score, args)
    assert list(f.input_specs) == [
        "args.0.0.x", "args.0.0.y", "args.0.1.x", "args.0.1.y", "args.1.data", "args.1.bias",
        "args.1.mask", "args.2.a.0", "args.2.a.1", "args.3"]
    assert list(f.output_specs) == ["out"]
    out = f(*args)
    assert isinstance(out, TensorProxy)
    torch.testing.assert_close(out.cpu(), score(*args), rtol=1e-5, atol=1e-5)
    assert f.output_specs_tree is f.output_specs["out"]
    spec_args, spec_kwargs = f.input_specs_tree
    assert spec_args[0][1].y is f.input_specs["args.0.1.y"] and spec_kwargs == {}
    assert [r.function for r in ctx.report().records if r.kind == "call"] == ["score"]


def test_constants_are_baked_in_and_returned(ctx, tmp_path, seed):
    def power(x, n, *, label=None):
        y = x
        for _ in range(n - 1):
            y = y * x
        return {"y": y, "n": n, "label": label}

    x = _t()
    f = _compile(ctx, tmp_path, power, (x, 3), {"label": "cube"})
    assert list(f.input_specs) == ["args.0"]
    out = f(x, 3, label="cube")
    assert out["n"] == 3 and out["label"] == "cube"
    torch.testing.assert_close(out["y"].cpu(), x * x * x)


def test_module_closure_keeps_constant_names(ctx, tmp_path, seed):
    lin = torch.nn.Linear(8, 8)

    def head(p: Point):
        return lin(p.x) + p.y

    args = (Point(_t(), _t()),)
    f = _compile(ctx, tmp_path, head, args)
    assert set(f.compiled.program.constants) == {"lin.weight", "lin.bias"}
    with torch.no_grad():
        _assert_tree_close(f(*args), head(*args))


def test_tensorproxy_sample_and_chained_call(ctx, tmp_path, seed):
    def produce(x):
        return Point(x * 2, x + 1)

    def consume(p: Point, *, scale):
        return p.x * scale - p.y

    x, scale = _t(), _t()
    consumer = _compile(ctx, tmp_path, consume, (produce(x),), {"scale": scale})
    wanted = {"out.x": consumer.input_specs["args.0.x"], "out.y": consumer.input_specs["args.0.y"]}
    producer = _compile(ctx, tmp_path, produce, (x,), io_spec_constraints=wanted)
    handed = producer(x)
    result = consumer(handed, scale=scale)
    torch.testing.assert_close(result.cpu(), consume(produce(x), scale=scale))
    if ctx.mndevice.name.startswith("mncore2"):
        call = [r for r in ctx.report().records if r.function == "consume"][-1]
        assert (call.relocations, call.conversions) == (2, 0)
    # A TensorProxy is a fine compile sample: it fixes shape and dtype.
    again = ctx.compile_automap(consume, (handed,), {"scale": scale},
                                storage.path(tmp_path / "again"))
    assert again.input_specs["args.0.x"].shape == (4, 8)


def test_compile_without_a_trace_uses_the_structure_of_an_eager_run(ctx, tmp_path,
                                                                     monkeypatch, seed):
    """A compile that never calls fn (a compile cache hit) still learns the output structure."""
    def pair(x):
        return Point(x + 1, x - 1)

    x = _t()
    _compile(ctx, tmp_path, pair, (x,))
    monkeypatch.setattr(ctx, "compile",
                        lambda fn, samples, where, **kwargs: ctx.load_codegen_dir(where))
    f = _compile(ctx, tmp_path, pair, (x,))
    _assert_tree_close(f(x), pair(x))


# -- bad input --------------------------------------------------------------------------------


def _mismatch_cases():
    t = torch.zeros(4, 8)
    return [
        ((Point(t, t), [t, t]), {"n": 2}, "'args.1' was compiled as a list, but this call "
         "gives a tuple", ((Point(t, t), (t, t)), {"n": 2})),
        ((Point(t, t), (t, t)), {"n": 2}, "'args.0' was compiled as the NamedTuple Point, but "
         "this call gives a tuple", (((t, t), (t, t)), {"n": 2})),
        ((Point(t, t), (t, t)), {"n": 2}, "no leaf 'args.1.1'", ((Point(t, t), (t,)),
                                                                 {"n": 2})),
        ((Point(t, t), (t, t)), {"n": 2}, "unexpected leaf 'args.2'",
         ((Point(t, t), (t, t), t), {"n": 2})),
        ((Point(t, t), (t, t)), {"n": 2}, "'kwargs.n' was compiled as the constant 2, but this "
         "call gives 3", ((Point(t, t), (t, t)), {"n": 3})),
        ((Point(t, t), (t, t)), {"n": 2}, "'kwargs.n' was compiled as the constant 2, but this "
         "call gives 2.0", ((Point(t, t), (t, t)), {"n": 2.0})),
        ((Point(t, t), (t, t)), {"n": 2}, "'args.1.0' was compiled as a tensor, but this call "
         "gives the constant 5", ((Point(t, t), (5, t)), {"n": 2})),
        ((Point(t, t), (t, t)), {"n": 2}, "no leaf 'kwargs.n'", ((Point(t, t), (t, t)), {})),
    ]


@pytest.mark.parametrize("case", range(len(_mismatch_cases())))
def test_a_call_with_another_structure_names_the_first_difference(ctx, tmp_path, case):
    compiled_args, compiled_kwargs, message, (args, kwargs) = _mismatch_cases()[case]

    def fn(p, q, *, n):
        return p.x * n + q[0] - q[1] + p.y

    f = _compile(ctx, tmp_path, fn, compiled_args, compiled_kwargs)
    before = (len(ctx.report().records), dict(f.compiled.bindings))
    user = [a.clone() for a in torch.utils._pytree.tree_leaves(args)
            if isinstance(a, torch.Tensor)]
    with pytest.raises(PytreeStructureError, match=message.replace("(", r"\(")) as info:
        f(*args, **kwargs)
    assert isinstance(info.value, InputError)
    assert (len(ctx.report().records), dict(f.compiled.bindings)) == before
    leaves = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
    assert all(torch.equal(a, b) for a, b in zip(leaves, user, strict=True))


def test_dataclass_field_none_then_tensor_is_a_structure_error(ctx, tmp_path):
    f = _compile(ctx, tmp_path, lambda b: b.data + b.bias, (Batch(_t(), _t()),))
    with pytest.raises(PytreeStructureError, match="unexpected leaf 'args.0.mask'"):
        f(Batch(_t(), _t(), _t()))


def test_a_wrong_shape_names_the_leaf(ctx, tmp_path):
    f = _compile(ctx, tmp_path, lambda p: p.x + p.y, (Point(_t(), _t()),))
    with pytest.raises(InputError, match=r"'args.0.y' .* shape \(4, 8\), not float32 of "
                                         r"shape \(2, 2\)"):
        f(Point(_t(), torch.zeros(2, 2)))


def test_unregistered_dataclass_is_a_clear_error(ctx, tmp_path):
    with pytest.raises(TypeError, match=r"'args.0' is an instance of Unregistered, a "
                                        r"dataclass not registered .* @register_pytree_dataclass"):
        _compile(ctx, tmp_path, lambda u: u.data * 2, (Unregistered(_t()),))
    with pytest.raises(TypeError, match=r"output 'out' is an instance of Unregistered, a "
                                        r"dataclass .* @register_pytree_dataclass"):
        _compile(ctx, tmp_path, lambda x: Unregistered(x * 2), (_t(),))
    f = _compile(ctx, tmp_path, lambda x: x * 2, (_t(),))
    with pytest.raises(TypeError, match="@register_pytree_dataclass"):
        f(Unregistered(_t()))


@pytest.mark.parametrize("args, kwargs, message", [
    (torch.zeros(2), None, r"positional arguments as a tuple \(e.g. \(x,\) for one argument\), "
                           "not a Tensor"),
    ((torch.zeros(2),), [1], "keyword arguments as a dict of str to values"),
    ((torch.zeros(2), object()), None, r"argument 'args.1' is of type object; pytree leaves must "
                                           "be"),
    (({"a.b": torch.zeros(2), "a": {"b": torch.zeros(2)}},), None,
     r"arguments args\[0\]\['a.b'\] and args\[0\]\['a'\]\['b'\] would both be named "
     "'args.0.a.b'"),
])
def test_bad_compile_arguments(context, tmp_path, args, kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        context.compile_automap(lambda *a: a[0] * 2, args, kwargs, storage.path(tmp_path))


def test_a_function_returning_no_tensor_is_an_error(context, tmp_path):
    with pytest.raises(TypeError, match=r"returned no tensor \(it returned \(\*, \*\)\)"):
        context.compile_automap(lambda x: (1, None), (_t(),), {}, storage.path(tmp_path))


def test_register_decorators_check_their_class():
    with pytest.raises(TypeError, match="takes a NamedTuple class, not tuple"):
        register_pytree_namedtuple(tuple)
    with pytest.raises(TypeError, match=r"takes a dataclass class .* not a Batch"):
        register_pytree_dataclass(Batch(_t(), _t()))
    with pytest.raises(TypeError, match="not int"):
        register_pytree_dataclass(int)
    # Registering again is harmless and returns the class.
    assert register_pytree_dataclass(Batch) is Batch
    assert register_pytree_namedtuple(Point) is Point


# -- the example ------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_example_runs(tmp_path, device):
    lines = run_example("pytree_signatures.py", device, cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "pytree signatures succeeded"
