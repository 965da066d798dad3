#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py - writes the seed corpora of the fuzz targets.

Each seed is a valid (or nearly valid) call in the target's input format,
so the fuzzer starts from inputs that reach deep into each op. Run from
anywhere; rewrites tests/fuzz/corpus/. The dictionary of fuzz_cli is read
from fuzz_cli.c so the two cannot drift apart.
"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_cli ----
src = open(os.path.join(HERE, "fuzz_cli.c")).read()
body = src[src.index("dict[] = {") + len("dict[] = {"):src.index("};", src.index("dict[] = {"))]
DICT = re.findall(r'"((?:[^"\\]|\\.)*)"', body)


def cli(*tokens, file=b""):
    out = bytes([len(tokens)])
    for t in tokens:
        out += bytes([DICT.index(t)]) if t in DICT else bytes([0xFF, len(t)]) + t.encode()
    return out + file


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


seeds_cli = {
    "sum": cli("sum", "--rows", "2", "--cols", "3", "--in", "x=@F", file=f32(1, 2, 3, 4, 5, 6)),
    "max_row": cli("max", "--axis", "row", "--rows", "2", "--cols", "3", "--in", "x=@F", file=f32(1, 2, 3, 4, 5, 6)),
    "rng": cli("rng", "--dist", "normal", "--count", "16", "--seed", "0x10"),
    "rng_out": cli("rng", "--dist", "raw", "--count", "7", "--out", "x=@O1"),
    "kl": cli("kl_div", "--rows", "1", "--cols", "2", "--in", "input=@F", "--in", "target=@F", "--reduction",
              "none", "--out", "y=@O1", file=f32(0.5, 0.5)),
    "dm": cli("dirichlet_multinomial", "--rows", "1", "--cols", "2", "--in", "counts=@F", "--in", "log_alpha=@F",
              "--with-coefficient", file=f32(1, 2)),
    "gmm_sample": cli("gmm_sample", "--batch", "2", "--components", "1", "--dim", "2", "--in", "mu=@F", "--in",
                      "log_var=@F", "--out", "z=@O1", "--out", "log_q=@O2", "--out", "component=@O3",
                      file=f32(0.1, 0.2, 0.3, 0.4)),
    "gmm_log_prob": cli("gmm_log_prob", "--batch", "1", "--components", "1", "--dim", "4", "--in", "z=@F",
                        "--in", "mu=@F", "--in", "log_var=@F", file=f32(0.1, 0.2, 0.3, 0.4)),
    "categorical": cli("categorical", "--rows", "1", "--cols", "4", "--in", "weights=@F", "--logits", "--seed",
                       "7", file=f32(0.1, 0.2, 0.3, 0.4)),
    "wrong_size": cli("sum", "--rows", "1", "--cols", "1", "--in", "x=@F", file=f32(1, 2)),
    "empty_rows": cli("mean", "--axis", "row", "--rows", "3", "--cols", "0", "--in", "x=@E"),
    "help": cli("--help"),
    "bad_number": cli("sum", "--rows", "18446744073709551616", "--cols", "1", "--in", "x=/dev/null"),
}
for name, data in seeds_cli.items():
    write("fuzz_cli", name, data)

# ---- fuzz_api ----


def small(v):
    assert 0 <= v < 239
    return bytes([v + 16])


def view(buf, off, rows, cols, stride=None, dtype=0):
    sel = buf | (4 if stride is not None else 0)
    out = bytes([sel]) + small(off) + small(rows) + small(cols)
    if stride is not None:
        out += small(stride)
    return out + bytes([dtype])


NONE = bytes([3]) + small(0) * 3 + bytes([0])
I32, U32 = 225, 205


def api(op, views, e1=0, e2=0, flags=0, K=1, extra=b""):
    views = views + [NONE] * (7 - len(views))
    rng = struct.pack("<Q", 12345) + small(0) + small(0)
    return bytes([op]) + b"".join(views) + bytes([e1 & 0xFF, e2 & 0xFF, flags]) + small(K) + rng + extra


seeds_api = {
    "reduce_sum_all": api(0, [view(0, 0, 4, 8), view(1, 0, 1, 1)], e1=1, e2=1),
    "reduce_lse_row": api(0, [view(0, 3, 4, 8, stride=9), view(1, 5, 4, 1)], e1=5, e2=2),
    "kl_none": api(1, [view(0, 0, 2, 8), view(0, 100, 2, 8), view(1, 0, 2, 8)], e1=0, flags=2),
    "dm_sum": api(2, [view(0, 0, 3, 5), view(0, 50, 1, 5), view(1, 0, 1, 1)], e1=1, flags=1),
    "gmm_log_prob": api(3, [view(0, 0, 2, 3), view(0, 10, 2, 6), view(0, 30, 2, 6), view(0, 60, 1, 2),
                            view(1, 0, 2, 1)], K=2),
    "gmm_sample": api(4, [view(0, 10, 2, 6), view(0, 30, 2, 6), view(0, 60, 1, 2), view(1, 0, 2, 3),
                          view(1, 20, 2, 1), view(1, 40, 2, 1, dtype=I32)], K=2),
    "rng_raw": api(5, [view(1, 0, 3, 7, dtype=U32)], e1=1),
    "categorical": api(6, [view(0, 0, 3, 4), view(1, 0, 3, 1, dtype=I32)], flags=1),
    "read_scalar": api(7, [view(0, 9, 1, 1)]),
    "upload": api(8, [view(0, 0, 1, 1)], extra=small(8) + small(16)),
    "fill": api(10, [view(1, 0, 1, 1)], extra=small(4) + small(64)),
}
for name, data in seeds_api.items():
    write("fuzz_api", name, data)
print(f"{len(seeds_cli)} fuzz_cli seeds, {len(seeds_api)} fuzz_api seeds")
