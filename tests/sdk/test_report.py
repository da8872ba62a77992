"""Report: the records of a Context's device work, as a table and as JSON."""

from __future__ import annotations

import json

import torch


def test_report_table_and_json(context, doubled):
    doubled({"x": torch.ones(32, 64)})["y"].cpu()
    report = context.report()
    kinds = [r.kind for r in report]
    assert kinds == ["load", "call", "read"]
    call = report.calls("double")[0]
    assert call.bytes == {"host": 8192, "compute": 16384, "converter": 0}
    assert call.cycles == sum(c.cycles for c in call.commands) > 0
    table = report.table(commands=True)
    assert "host B" in table and "HostWrite" in table and "Launch double#1" in table
    data = json.loads(report.to_json())
    assert data["device"] == "mncore2:auto"
    assert data["records"][1]["cycles_kind"] == "modeled"
