"""The strided fast paths against the index paths they replace: identical images and tensors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mncore_hdl.layout import (
    DTYPES,
    ConversionDescriptor,
    Layout,
    UnsupportedConversion,
    conversion,
)
from mncore_hdl.layout.mapping import from_device, to_device, write_image
from mncore_hdl.layout.random_layouts import random_layout
from mncore_hdl.layout.reference import from_device_reference, to_device_reference
from mncore_hdl.layout.strided import radix_pieces


def _raw(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_floating_point():  # integers and bools compare exactly as they are
        return tensor
    return tensor.view(torch.int32 if tensor.element_size() == 4 else torch.int16)


@st.composite
def layouts(draw, count: int = 1):
    """``count`` random layouts of one random shape and dtype (tiled, transposed, padded)."""
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 40), min_size=rank, max_size=rank)))
    if np.prod(shape) > 4096:
        shape = shape[:1]
    rng = draw(st.randoms(use_true_random=False))
    return [random_layout(rng, shape, dtype) for _ in range(count)]


def _tensor(layout: Layout, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(layout.shape, generator=gen).to(getattr(torch, layout.dtype))


@settings(max_examples=150, deadline=None)
@given(layouts(), st.integers(0, 2**31 - 1))
def test_strided_mapping_matches_index_path(drawn, seed):
    (layout,) = drawn
    tensor = _tensor(layout, seed)
    image = to_device(tensor, layout)
    reference = to_device_reference(tensor, layout)
    assert image.dtype == reference.dtype and image.shape == reference.shape
    assert np.array_equal(image, reference), f"{layout} (seed {seed})"
    back = from_device(image, layout)
    assert torch.equal(_raw(back), _raw(from_device_reference(image, layout))), f"{layout}"
    # A non-contiguous input (a transposed copy's transpose) lays out the same.
    if tensor.dim() >= 2:
        strided = tensor.transpose(0, 1).contiguous().transpose(0, 1)
        assert np.array_equal(to_device(strided, layout), reference), f"{layout} (strided)"


@settings(max_examples=60, deadline=None)
@given(layouts(), st.integers(0, 2**31 - 1), st.integers(1, 3))
def test_from_device_reads_a_view_of_a_larger_memory(drawn, seed, pitch_extra):
    """Images that are views of DRAM (Groups a row apart, at an offset) read back the same."""
    (layout,) = drawn
    tensor = _tensor(layout, seed)
    image = to_device_reference(tensor, layout)
    groups, lw = image.shape
    memory = np.zeros((groups + 1, lw + 5 + pitch_extra), dtype=np.uint64)
    view = memory[1:, 3:3 + lw]
    view[...] = image
    assert torch.equal(_raw(from_device(view, layout)), _raw(tensor)), f"{layout}"
    again = np.zeros_like(memory)
    write_image(again[1:, 3:3 + lw], tensor, layout)
    assert np.array_equal(again[1:, 3:3 + lw] * (image != 0), image), f"{layout}"


@settings(max_examples=100, deadline=None)
@given(layouts(2), st.integers(0, 2**31 - 1))
def test_strided_conversion_matches_index_path(drawn, seed):
    a, b = drawn
    try:
        desc = conversion(a, b)
    except UnsupportedConversion:
        return
    src = to_device_reference(_tensor(a, seed), a)
    assert np.array_equal(desc.execute(src), desc.execute_reference(src)), f"{a} -> {b}"


@settings(max_examples=80, deadline=None)
@given(layouts(2), st.integers(0, 2**31 - 1), st.integers(1, 3))
def test_conversion_between_views_of_a_larger_memory(drawn, seed, pitch_extra):
    """Source and destination as views of DRAM (Groups a row apart, at an offset): the strided
    copies, one Group at a time where a side spans Groups, give the index path's image."""
    a, b = drawn
    try:
        desc = conversion(a, b)
    except UnsupportedConversion:
        return
    src = to_device_reference(_tensor(a, seed), a)
    want = desc.execute_reference(src)
    rows = max(src.shape[0], want.shape[0]) + 1
    pitch = src.shape[1] + want.shape[1] + 7 + pitch_extra
    memory = np.full((rows, pitch), 0xDEAD, dtype=np.uint64)
    src_view = memory[1:1 + src.shape[0], 2:2 + src.shape[1]]
    dst_view = memory[:want.shape[0], 4 + src.shape[1]:4 + src.shape[1] + want.shape[1]]
    src_view[...] = src
    before = memory.copy()
    desc.execute_into(src_view, dst_view)
    assert np.array_equal(dst_view, want), f"{a} -> {b}"
    outside = np.ones(memory.shape, dtype=bool)
    outside[:want.shape[0], 4 + src.shape[1]:4 + src.shape[1] + want.shape[1]] = False
    assert np.array_equal(memory[outside], before[outside]), f"{a} -> {b} wrote outside"


@settings(max_examples=40, deadline=None)
@given(layouts(2))
def test_descriptor_to_dict_is_asdict_with_a_list_shape(drawn):
    a, b = drawn
    try:
        desc = conversion(a, b)
    except UnsupportedConversion:
        return
    want = dataclasses.asdict(desc)
    want["shape"] = list(desc.shape)
    assert desc.to_dict() == want
    assert [type(v) for v in desc.to_dict().values()] == [type(v) for v in want.values()]
    assert ConversionDescriptor.from_dict(desc.to_dict()) == desc


@pytest.mark.parametrize(("extents", "dim"), [((3, 4), 9), ((2, 2, 2), 5), ((5,), 5), ((3, 4), 12),
                                               ((4, 2, 4), 25)])
def test_radix_pieces_cover_the_range_once(extents, dim):
    covered = []
    for piece in radix_pieces(extents, dim):
        grid = np.indices(piece.counts).reshape(len(extents), -1).T + np.array(piece.starts)
        inner = np.cumprod((1,) + extents[:0:-1])[::-1]
        index = (grid * inner).sum(axis=1)
        assert list(index) == list(range(piece.first, piece.first + len(index)))
        covered.extend(index.tolist())
    assert covered == list(range(dim))


def test_from_device_without_copy_views_a_row_major_image():
    tensor = torch.randn(8, 6)
    layout = Layout.parse("(8,6)/((8:3), (3:1, 2_W:1))")
    image = to_device_reference(tensor, layout)
    view = from_device(image, layout, copy=False)
    assert torch.equal(view, tensor)
    image[0, 0] = 0
    assert view[0, 0].item() == 0 and view[0, 1].item() == 0  # shares the image's memory
    tiled = Layout.parse("(8,6)/((8:1), (3:8, 2_W:1))")
    copied = from_device(to_device_reference(tensor, tiled), tiled, copy=False)
    assert torch.equal(copied, tensor)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_identity_layouts_encode_and_decode_as_the_index_path(dtype):
    """A row-major layout whose image is the tensor's own bytes (its encode and decode skip the
    strided plan) gives the index path's images and tensors, in every element type."""
    from mncore_hdl.layout import host_layout
    from mncore_hdl.layout.strided import strided_plan

    layout = host_layout((6, 8), dtype)
    assert strided_plan(layout).identity
    tensor = _tensor(layout, 7)
    if dtype == "int64":
        tensor = torch.randint(-(1 << 31), 1 << 31, (6, 8), generator=torch.Generator()
                               .manual_seed(7))
    image = to_device(tensor, layout)
    reference = to_device_reference(tensor, layout)
    assert image.dtype == reference.dtype and np.array_equal(image, reference)
    writable = image.copy()
    for copy in (True, False):
        back = from_device(writable, layout, copy=copy)
        assert back.dtype == tensor.dtype and back.is_contiguous()
        assert torch.equal(_raw(back), _raw(from_device_reference(reference, layout)))
        assert torch.equal(_raw(back), _raw(tensor))
    # A copy owns its memory; a view (of a writable image, a type stored as itself) does not.
    assert from_device(writable, layout).data_ptr() != writable.ctypes.data
    shares = from_device(writable, layout, copy=False).data_ptr() == writable.ctypes.data
    assert shares == (not DTYPES[dtype].narrowed)
    if dtype == "int64":
        with pytest.raises(ValueError, match="outside"):
            to_device(torch.full((6, 8), 1 << 31), layout)


def test_a_large_int64_identity_layout_lays_out_and_is_range_checked():
    from mncore_hdl.layout import host_layout

    layout = host_layout((300, 256), "int64")  # more elements than numpy's min and max take
    tensor = torch.randint(-(1 << 31), 1 << 31, (300, 256), generator=torch.Generator()
                           .manual_seed(3))
    assert np.array_equal(to_device(tensor, layout), to_device_reference(tensor, layout))
    assert torch.equal(from_device(to_device(tensor, layout).copy(), layout), tensor)
    tensor[299, 255] = -(1 << 31) - 1
    with pytest.raises(ValueError, match=r"value -2147483649 at index \(299, 255\)"):
        to_device(tensor, layout)
