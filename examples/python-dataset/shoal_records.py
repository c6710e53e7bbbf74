#!/usr/bin/python3
"""Write and read shoal's LMDB datasets from Python, with nothing of
shoal's: Debian's python3-lmdb and python3-thrift, and code the stock
Thrift compiler generates from thrift/record.thrift.

The format (what `shoal import` writes and lmdb_input reads):
  - a dataset is a directory holding an LMDB environment (data.mdb), its
    unnamed database holding every example;
  - keys are the indices 0, 1, ..., N-1 written as ten decimal digits
    ("0000000000"), contiguous from 0;
  - each value is one Record struct (thrift/record.thrift) serialised
    with the Thrift binary protocol: label (i32, -1 for none), shape
    (list<i32>, one example without the batch dimension), and either
    pixels (binary, uint8) or floats (binary, little-endian float32),
    and optionally targets (binary, little-endian float32) for a
    regression loss.  Every record of a dataset has the same shape.

Usage:
  shoal_records.py blobs OUT --count N [--classes K] [--dim D] [--seed S] [--spread X]
      Gaussian blobs, one per class, as float records of shape [D]: a
      data set to train any classifier on.
  shoal_records.py idx OUT --images X.gz --labels Y.gz
      MNIST-style IDX files as pixel records of shape [1, rows, cols]
      (what `shoal import idx` makes).
  shoal_records.py dump DIR [--first N]
      label, shape and the first values of the first N records.

As a module: write(path, records) takes (label, shape, pixels or None,
floats or None) tuples; read(path) yields Record objects.
"""
import argparse
import atexit
import gzip
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import lmdb
from thrift.protocol import TBinaryProtocol
from thrift.TSerialization import deserialize, serialize

HERE = os.path.dirname(os.path.abspath(__file__))
IDL = os.path.join(HERE, "..", "..", "thrift", "record.thrift")


def _record_module():
    """The Record class, generated from thrift/record.thrift on first use."""
    gen = tempfile.mkdtemp(prefix="shoal-records-")
    atexit.register(shutil.rmtree, gen, True)
    subprocess.run(["thrift", "--gen", "py", "-out", gen, IDL], check=True)
    sys.path.insert(0, gen)
    from record import ttypes  # noqa: E402  (generated just now)
    return ttypes


ttypes = _record_module()
PROTOCOL = TBinaryProtocol.TBinaryProtocolFactory()


def key(index):
    return b"%010d" % index


def write(path, records, map_size=1 << 32):
    """Writes (label, shape, pixels, floats) tuples as a new dataset at path."""
    os.makedirs(path, exist_ok=True)
    env = lmdb.open(path, map_size=map_size, subdir=True)
    count = 0
    with env.begin(write=True) as txn:
        for label, shape, pixels, floats in records:
            rec = ttypes.Record(label=label, shape=list(shape))
            if pixels is not None:
                rec.pixels = bytes(pixels)
            else:
                rec.floats = struct.pack("<%df" % len(floats), *floats)
            # keys in order: append fills pages as `shoal import` does
            txn.put(key(count), serialize(rec, PROTOCOL), append=True)
            count += 1
    env.close()
    return count


def read(path):
    """Yields the Record of every example, in index order."""
    env = lmdb.open(path, readonly=True, lock=False, subdir=True)
    with env.begin() as txn:
        for index, (k, v) in enumerate(txn.cursor()):
            if k != key(index):
                raise ValueError("%s: key %r where %r was expected" % (path, k, key(index)))
            yield deserialize(ttypes.Record(), v, PROTOCOL)
    env.close()


def values(rec):
    if rec.pixels is not None:
        return list(rec.pixels)
    return list(struct.unpack("<%df" % (len(rec.floats) // 4), rec.floats))


def blobs(count, classes, dim, seed, spread):
    # the classes' centers depend on the shape only, so that a training
    # set and a test set written with different seeds share them
    place = random.Random(classes * 1000003 + dim)
    centers = [[place.uniform(-1, 1) for _ in range(dim)] for _ in range(classes)]
    rng = random.Random(seed)
    for _ in range(count):
        label = rng.randrange(classes)
        point = [c + rng.gauss(0, spread) for c in centers[label]]
        yield label, [dim], None, point


def idx(images, labels):
    with gzip.open(images, "rb") as f:
        magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
        if magic != 0x803:
            raise ValueError("%s: not an IDX image file (magic 0x%x)" % (images, magic))
        pixels = f.read(count * rows * cols)
    with gzip.open(labels, "rb") as f:
        magic, nlabels = struct.unpack(">II", f.read(8))
        if magic != 0x801 or nlabels != count:
            raise ValueError("%s: not the labels of %s" % (labels, images))
        marks = f.read(count)
    size = rows * cols
    for i in range(count):
        yield marks[i], [1, rows, cols], pixels[i * size:(i + 1) * size], None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("blobs")
    b.add_argument("out")
    b.add_argument("--count", type=int, required=True)
    b.add_argument("--classes", type=int, default=4)
    b.add_argument("--dim", type=int, default=16)
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--spread", type=float, default=1.0)
    x = sub.add_parser("idx")
    x.add_argument("out")
    x.add_argument("--images", required=True)
    x.add_argument("--labels", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dir")
    d.add_argument("--first", type=int, default=3)
    args = parser.parse_args()
    if args.command == "blobs":
        n = write(args.out, blobs(args.count, args.classes, args.dim, args.seed, args.spread))
        print("%s: %d records of shape [%d], %d classes" % (args.out, n, args.dim, args.classes))
    elif args.command == "idx":
        n = write(args.out, idx(args.images, args.labels))
        print("%s: %d records" % (args.out, n))
    else:
        for i, rec in enumerate(read(args.dir)):
            if i >= args.first:
                break
            v = values(rec)
            print("%d label=%d shape=%s sum=%g first=%s" % (i, rec.label, rec.shape, sum(v), v[:4]))


if __name__ == "__main__":
    main()
