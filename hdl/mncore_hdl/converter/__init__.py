"""The DRAM-to-DRAM layout converter: program compiler, register map, RTL engines and top."""

from .program import ConverterProgram, ProgramError, compile_program, simulate_program
from .regmap import ErrorCode, Reg, registers

__all__ = ["ConverterProgram", "ProgramError", "compile_program", "simulate_program",
           "ErrorCode", "Reg", "registers"]
