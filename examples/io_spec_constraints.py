"""Hand a device-resident tensor from one compiled function to the next, on a modeled MN-Core 2.

Part 1 compiles the consumer first, then the producer with ``io_spec_constraints`` taken from the
consumer's input spec: the producer writes its output in exactly the layout the consumer reads,
so passing the producer's TensorProxy to the consumer is a relocation (the consumer's input is
re-pointed at the producer's buffer) and no device bytes move.

Part 2 (skipped with ``--no-compare``) compiles the producer again without the constraint: the
same hand-off now needs a DRAM-to-DRAM layout conversion. The result is the same; the report
shows what the conversion cost.

    ./exec_with_env.sh python3 examples/io_spec_constraints.py --device mncore2:auto
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from mlsdk import Context, MNDevice, storage

Tensors = dict[str, torch.Tensor]


def producer(inputs: Tensors) -> Tensors:
    return {"shared": inputs["x"] * 2}


def consumer(inputs: Tensors) -> Tensors:
    return {"result": inputs["shared"] + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--cols", type=int, default=64)
    parser.add_argument("--no-compare", action="store_true",
                        help="skip part 2 (the hand-off without constraints)")
    parser.add_argument("--report", action="store_true", help="print every device command")
    args = parser.parse_args()

    context = Context(MNDevice(args.device))
    sample = torch.randn(args.rows, args.cols)
    options = {"float_dtype": "float"}
    work = Path(tempfile.mkdtemp(prefix="mncore_io_spec_"))

    # Part 1: the consumer decides the layout; the producer is compiled to match it.
    compiled_consumer = context.compile(consumer, {"shared": sample},
                                        storage.path(work / "consumer"), options=options)
    wanted = compiled_consumer.input_specs["shared"]
    compiled_producer = context.compile(producer, {"x": sample}, storage.path(work / "producer"),
                                        options=options, io_spec_constraints={"shared": wanted})
    handed = compiled_producer({"x": torch.ones_like(sample)})
    result = compiled_consumer(handed)["result"].cpu()

    assert compiled_producer.output_specs["shared"].is_memcopyable_to(wanted)
    assert torch.allclose(result, torch.full_like(result, 3))
    relocated = context.report().calls("consumer")[-1]
    print(f"consumer input spec: {wanted}")
    print(f"hand-off with constraints: {relocated.relocations} relocation(s), "
          f"{relocated.conversions} conversion(s), {relocated.bytes['converter']} converter bytes,"
          f" input read from {compiled_consumer.bindings.get('shared', 'host memory')}")
    print("producer -> consumer direct-use succeeded")

    if not args.no_compare:
        # Part 2: the producer's default output layout (compute-native tiles) differs.
        plain_producer = context.compile(producer, {"x": sample},
                                         storage.path(work / "producer_plain"), options=options)
        spec = plain_producer.output_specs["shared"]
        plain = compiled_consumer(plain_producer({"x": torch.ones_like(sample)}))
        assert torch.equal(plain["result"].cpu(), result)
        converted = context.report().calls("consumer")[-1]
        kind = converted.cycles_kind
        print(f"without constraints: producer output {spec.layout} is memcopyable: "
              f"{spec.is_memcopyable_to(wanted)}")
        print(f"hand-off without constraints: {converted.conversions} conversion(s), "
              f"{converted.bytes['converter']} converter bytes, {converted.cycles} {kind} cycles "
              f"(vs {relocated.cycles} with relocation); same result")
    if args.report:
        print(context.report().table(commands=True))
    context.close()


if __name__ == "__main__":
    main()
