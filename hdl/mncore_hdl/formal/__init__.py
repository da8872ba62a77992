"""Formal proofs: the SymbiYosys runner and the harnesses that put blocks under proof."""
