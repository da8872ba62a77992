"""Layout notation: parse, print, validation errors, normalisation, sizes."""

from __future__ import annotations

import pytest
from mncore_hdl.layout import Layout, LayoutError, SubAxis, host_layout, native_layout

EXAMPLES = [
    ("(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))", "float32"),
    ("(32,64)/((32:32), (32:1, 2_W:1))", "float32"),
    ("(32,64)/((16:1, 2_W:1), (64:16))", "float32"),
    ("(33,65)/((33:33), (33:1, 2_W:1))", "float32"),
    ("(2,33,65)/((2:561), (33:17), (17:1, 4_H:1))", "float16"),
    ("(8)/((2:1, 4_H:1))", "bfloat16"),
    ("()/()", "float32"),
    ("(1,5)/((), (5:1))", "float32"),
]


@pytest.mark.parametrize("text, dtype", EXAMPLES)
def test_parse_print_round_trip(text, dtype):
    layout = Layout.parse(text, dtype)
    assert str(layout) == text
    assert Layout.parse(str(layout), dtype) == layout
    assert Layout.from_dict(layout.to_dict()) == layout


def test_whitespace_and_lowercase_levels_are_accepted():
    layout = Layout.parse(" ( 32 , 64 ) / ( ( 4_g : 1 , 8 : 32 ) , ( 32:1 , 2_w:1 ) ) ")
    assert str(layout) == "(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))"


def test_worked_example_sizes():
    layout = Layout.parse("(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))")
    assert layout.groups == 4
    assert layout.lw_per_group == 7 * 32 + 31 + 1
    assert layout.nbytes == 4 * 256 * 8 == 32 * 64 * 4
    assert layout.data_nbytes == 32 * 64 * 4


def test_padding_counts_in_nbytes():
    layout = Layout.parse("(33,65)/((33:33), (33:1, 2_W:1))")
    assert layout.nbytes == 33 * 33 * 8
    assert layout.data_nbytes == 33 * 65 * 4


@pytest.mark.parametrize("text, dtype, message", [
    ("(32,64)/((32:1), (64:1))", "float32", "two elements map to the same LW lane"),
    ("(32,64)/((32:64), (32:1, 2_H:1))", "float32", "float32 packs into W lanes, not H lanes"),
    ("(32,64)/((64:64), (32:1, 2_W:1))", "float32", "needs an outermost extent of 32, not 64"),
    ("(32,64)/((16:64), (32:1, 2_W:1))", "float32", "cover only 16"),
    ("(32,64)/((32:32), (16:1, 4_W:1))", "float32", "an LW holds only 2 float32 lanes"),
    ("(32,64)/((32:32))", "float32", "the shape has 2 axes but 1 sub-axis lists"),
    ("32,64/((32:32), (32:1))", "float32", "must be parenthesised"),
    ("(32,64)((32:32), (32:1))", "float32", "has no '/'"),
    ("(32,64)/((32:32), (32:1, 2_Q:1))", "float32", "level must be one of A, G, W, H"),
    ("(32,64)/((32:32), (32:1, 2_W))", "float32", "is not 'E:S' or 'E_L:S'"),
    ("(32,64)/((32:32), (32:1, 2_W:1)", "float32", "unbalanced"),
    ("(0,4)/((), (4:1))", "float32", "Shape entries must be positive integers"),
])
def test_invalid_layouts_raise_clear_errors(text, dtype, message):
    with pytest.raises(LayoutError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Layout.parse(text, dtype)


def test_unknown_dtype_and_bad_types():
    with pytest.raises(TypeError, match="Element type must be one of float32, float16, bfloat16"):
        Layout.parse("(4)/((4:1))", "int8")
    with pytest.raises(TypeError, match="Layout text must be a string"):
        Layout.parse(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Sub-axis extent must be an integer"):
        SubAxis(2.0, "A", 1)  # type: ignore[arg-type]


def test_normalisation_makes_equivalent_layouts_equal():
    split = Layout.parse("(32,64)/((4:256, 8:32), (8:4, 4:1, 2_W:1))")
    merged = Layout.parse("(32,64)/((32:32), (32:1, 2_W:1))")
    assert split != merged
    assert split.equivalent(merged)
    assert split.normalized == merged
    with_units = Layout.parse("(32,64)/((1:999, 32:32), (32:1, 1_G:0, 2_W:1))")
    assert with_units.equivalent(merged)


def test_normalisation_trims_padding_folded_by_a_merge():
    layout = Layout.parse("(65)/((33:2, 2:1))")
    assert str(layout.normalized) == "(65)/((65:1))"


def test_different_layouts_are_not_equivalent():
    rows = Layout.parse("(32,64)/((32:32), (32:1, 2_W:1))")
    cols = Layout.parse("(32,64)/((16:1, 2_W:1), (64:16))")
    assert not rows.equivalent(cols)
    assert not rows.equivalent(Layout.parse("(32,64)/((32:32), (32:1, 2_H:1))", "float16"))
    assert not rows.equivalent(Layout.parse("(32,64)/((32:64), (32:1, 2_W:1))"))


@pytest.mark.parametrize("shape", [(32, 64), (33, 65), (2, 33, 65), (7,), (1, 1), (3, 4, 5, 6)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_default_families_are_valid_and_differ(shape, dtype):
    host, native = host_layout(shape, dtype), native_layout(shape, dtype)
    assert host.shape == native.shape == shape
    assert host.groups == 1
    assert host.nbytes >= host.data_nbytes
    assert native.nbytes >= native.data_nbytes
    if len(shape) >= 2 and shape[-2] >= 16 and shape[-1] >= 16:
        assert native.groups > 1
        assert not host.equivalent(native)


def test_host_layout_is_row_major_packed():
    assert str(host_layout((32, 64))) == "(32,64)/((32:32), (32:1, 2_W:1))"
    assert str(host_layout((4, 6), "float16")) == "(4,6)/((4:2), (2:1, 4_H:1))"


def test_native_layout_tiles_and_spreads_rows():
    assert str(native_layout((32, 64))) == "(32,64)/((4_G:1, 8:4), (8:32, 4:1, 2_W:1))"


@pytest.mark.parametrize("text", [f"({'9' * 400})/(({'9' * 400}:1))",
                                  "(4)/((4:99999999999999999999))"])
def test_huge_layout_extents_are_layout_errors(text):
    with pytest.raises(LayoutError, match="below 2\\*\\*48"):
        Layout.parse(text)
