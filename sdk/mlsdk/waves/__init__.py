"""Waves from Python: read an RTL device's wave file (FST or VCD) by command, call and port.

>>> from mlsdk.waves import Waves
>>> waves = Waves("build/waves/mncore2_icarus-1234-5678.fst")
>>> waves.converter_busy_cycles(waves.call(2))

``python -m mlsdk.waves FILE`` prints the per-command summary (:func:`format_summary`).
"""

from .reader import Span, WaveCommand, Waves
from .summary import format_summary

__all__ = ["Waves", "WaveCommand", "Span", "format_summary"]
