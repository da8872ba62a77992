"""The golden mapping: to_device / from_device, and conversion descriptors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mncore_hdl.layout import (
    ConversionDescriptor,
    Layout,
    LayoutError,
    UnsupportedConversion,
    conversion,
    dtype_name,
    from_device,
    host_layout,
    native_layout,
    to_device,
)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(32, 64), (33, 65), (2, 33, 65), (5,), (), (1, 7), (9, 1), (3, 4, 5, 6)]


def _families(shape, dtype):
    name = dtype_name(dtype)
    layouts = [host_layout(shape, name), native_layout(shape, name)]
    if len(shape) == 2:
        rows, cols = shape
        lane = "W" if dtype == torch.float32 else "H"
        lanes = 2 if dtype == torch.float32 else 4
        lanes = min(lanes, rows)
        words = -(-rows // lanes)
        # Transposed: columns outermost, rows packed into lanes.
        layouts.append(Layout.parse(
            f"({rows},{cols})/(({words}:1, {lanes}_{lane}:1), ({cols}:{words}))", name))
        if rows % 4 == 0:
            # Rows dealt over Groups, one row per LW lane group.
            layouts.append(Layout.parse(
                f"({rows},{cols})/(({rows // 4}:{cols}, 4_G:1), ({cols}:1))", name))
    return layouts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_to_device_from_device_round_trip(shape, dtype, seed):
    tensor = torch.randn(shape).to(dtype)
    for layout in _families(shape, dtype):
        image = to_device(tensor, layout)
        assert image.dtype == np.uint64
        assert image.shape == (layout.groups, layout.lw_per_group)
        back = from_device(image, layout)
        assert back.dtype == dtype and back.shape == tensor.shape
        assert torch.equal(back, tensor), layout


def test_worked_example_places_elements_where_the_notation_says():
    layout = Layout.parse("(32,64)/((4_G:1, 8:32), (32:1, 2_W:1))")
    tensor = torch.arange(32 * 64, dtype=torch.float32).reshape(32, 64)
    image = to_device(tensor, layout)
    lanes = image.view(np.uint32).reshape(4, 256, 2)
    for i, j in [(0, 0), (0, 1), (0, 2), (1, 0), (8, 0), (9, 5), (31, 63)]:
        group, row = divmod(i, 8)
        addr = row * 32 + j // 2
        assert lanes[group, addr, j % 2] == np.float32(tensor[i, j]).view(np.uint32)


def test_padding_lanes_are_zero():
    layout = host_layout((3, 3))
    image = to_device(torch.ones(3, 3), layout)
    lanes = image.view(np.uint32).reshape(3, 2, 2)
    assert (lanes[:, 1, 1] == 0).all()
    assert (lanes[:, 0, :] == np.float32(1).view(np.uint32)).all()


def test_to_device_rejects_a_tensor_of_another_shape_or_dtype():
    with pytest.raises(LayoutError, match="holds a float32 tensor of shape \\(32, 64\\)"):
        to_device(torch.ones(32, 63), host_layout((32, 64)))
    with pytest.raises(LayoutError, match="not a float16 tensor"):
        to_device(torch.ones(32, 64, dtype=torch.float16), host_layout((32, 64)))
    with pytest.raises(LayoutError, match="expected an image"):
        from_device(np.zeros((1, 3), dtype=np.uint64), host_layout((32, 64)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_conversion_matches_golden_images(shape, dtype, seed):
    tensor = torch.randn(shape).to(dtype)
    layouts = _families(shape, dtype)
    for src in layouts:
        for dst in layouts:
            desc = conversion(src, dst)
            out = desc.execute(to_device(tensor, src))
            assert np.array_equal(out, to_device(tensor, dst)), (src, dst)
            assert desc.read_lw * 8 == src.nbytes
            assert desc.write_lw * 8 == dst.nbytes
            again = ConversionDescriptor.from_dict(desc.to_dict())
            assert again == desc


def test_conversion_of_unpadded_tensors_is_not_masked():
    desc = conversion(host_layout((32, 64)), native_layout((32, 64)))
    assert not desc.masked
    assert desc.iterations == 32 * 64
    padded = conversion(host_layout((33, 65)), native_layout((33, 65)))
    assert padded.masked


def test_conversion_errors():
    with pytest.raises(LayoutError, match="shapes and element types must match"):
        conversion(host_layout((32, 64)), host_layout((64, 32)))
    with pytest.raises(TypeError, match="takes two Layouts"):
        conversion("a", host_layout((4,)))  # type: ignore[arg-type]
    a = Layout.parse("(30)/((5:1, 6:5))")
    b = Layout.parse("(30)/((3:1, 10:3))")
    with pytest.raises(UnsupportedConversion, match="do not nest"):
        conversion(a, b)
