"""Device commands: each round-trips through its JSON dict, a Convert with its typed descriptor."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mlsdk.device.commands import (
    Bind,
    Buffer,
    Convert,
    HostRead,
    HostWrite,
    Launch,
    command_from_dict,
)
from mncore_hdl.layout import conversion, host_layout, native_layout


def test_commands_round_trip_through_json():
    buf = Buffer(3, 1, 2, 0x40, 16)
    image = np.arange(32, dtype=np.uint64).reshape(2, 16)
    desc = conversion(host_layout((4, 8)), native_layout((4, 8)))
    commands = [HostWrite(buf, image), HostRead(buf),
                Convert(buf, "a", buf, "b", desc),
                Launch("f#1", {"x": buf}), Bind("f#1", "x", buf)]
    for command in commands:
        again = command_from_dict(json.loads(json.dumps(command.to_dict())))
        assert again == command and type(again) is type(command)
        if isinstance(command, Convert):
            assert again.descriptor == desc  # rebuilt as the typed descriptor
    assert np.array_equal(command_from_dict(commands[0].to_dict()).data, image)
    with pytest.raises(ValueError, match="Unknown device command kind 'Poke'"):
        command_from_dict({"kind": "Poke"})
    assert str(buf) == "buf#3@G1-G2:0x40+16LW"
