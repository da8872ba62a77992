"""Helpers shared by this repository's tests, cocotb launchers and benches (not public API).

:mod:`~mlsdk.testing.flows` runs producer -> consumer flows on any device;
:mod:`~mlsdk.testing.seeds` finds the seed documents and extracts their sample program;
:mod:`~mlsdk.testing.soak` is the soak of ``bench/soak.py``. The hardware-side helpers live in
:mod:`mncore_hdl.testing`.
"""
