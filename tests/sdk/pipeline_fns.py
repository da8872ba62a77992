"""The toy functions the pipeline, cost-model, advice and loop-carried tests hand tensors between:
a chain ``first -> second -> third`` (``fourth`` a second consumer of ``second``) and a decode
step whose ``k_out`` feeds its own ``k``."""

from __future__ import annotations


def first(inputs):
    return {"a": inputs["x"] * 2}


def second(inputs):
    return {"b": inputs["a"] @ inputs["w"]}


def third(inputs):
    return {"c": inputs["b"].relu() + 1}


def fourth(inputs):
    return {"d": inputs["b"] - 3}


def decode_step(inputs):
    k = inputs["k"]
    return {"k_out": k * 0.5 + inputs["x"], "y": (k + inputs["x"]).sum(dim=0)}
