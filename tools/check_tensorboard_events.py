#!/usr/bin/env python3
"""Reads a distzo TensorBoard event file with TensorBoard's own reader and writes what it
read, one event a line, for tests/test_tensorboard.c to compare its own decoding against.

    tools/check_tensorboard_events.py tests/data/tensorboard/run.tfevents \
        > tests/data/tensorboard/run.events.txt

run.tfevents is the event file of a 2-rank `mpirun -np 2 distzo train --steps 4 --eval-every 2
--train-examples 32 --dev-examples 16 --batch 4 --threads 1` run (its metrics.jsonl is
beside it). Each output line: wall_time (%.17g), step, then either `file_version VALUE` or
`TAG VALUE` (the scalar as float32, %.9g, as
TensorBoard's scalars plugin gets it). TensorBoard's EventFileLoader checks both
masked CRC32Cs of every record (tensorboard.compat.tensorflow_stub); a bad one raises.
Needs `pip install tensorboard` (the build and tests do not).
"""
import struct
import sys

from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util


def main(path):
    n = 0
    for event in event_file_loader.EventFileLoader(path).Load():
        n += 1
        head = "%.17g %d" % (event.wall_time, event.step)
        which = event.WhichOneof("what")
        if which == "file_version":
            print(head, "file_version", event.file_version)
        elif which == "summary":
            for v in event.summary.value:
                # The loader migrates simple_value into a scalars-plugin tensor, as TensorBoard
                # shows it: a value it would not plot as a scalar is an error here.
                if v.metadata.plugin_data.plugin_name != "scalars":
                    sys.exit("%s: event %d: %s is not read as a scalar" % (path, n, v.tag))
                x = float(tensor_util.make_ndarray(v.tensor).item())
                f = struct.unpack("<f", struct.pack("<f", x))[0]  # the float32, printed exactly
                print(head, v.tag, "%.9g" % f)
        else:
            sys.exit("%s: event %d holds %s, not a scalar summary" % (path, n, which))
    if n == 0:
        sys.exit("%s: no events read" % path)


if __name__ == "__main__":
    main(sys.argv[1])
