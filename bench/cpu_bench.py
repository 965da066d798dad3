#!/usr/bin/env python3
"""CPU benchmark: tally's host backend (and PoCL, when present) against
NumPy/SciPy float32 on the same arrays, timed in the same process.

The five workloads of issue 10, the KL from logits (issue 16), and a memory-bandwidth probe (NumPy copy and
fill). Each time is the best of --repeat runs, in milliseconds; tally's time
covers the op call (synchronous on the host; followed by tally_sync on
OpenCL) and nothing else: inputs are uploaded once beforehand.

numpy and scipy are benchmark dependencies only. Usage:
  python3 bench/cpu_bench.py --lib build/libtally.so [--backends host,opencl]
      [--impls best,scalar] [--repeat 3] [--json out.json]
Per-implementation rows for the host backend are taken by re-creating the
context with TALLY_HOST_IMPL set (the choice is made at context creation).
"""
import argparse
import concurrent.futures
import ctypes as C
import json
import os
import platform
import subprocess
import sys
import time

import math

import numpy as np

try:
    import scipy.special as sps
except ImportError:  # a machine without SciPy times NumPy only (the DM row has no baseline then)
    sps = None

BACKENDS = {"opencl": 2, "host": 3}
SUM, LOGSUMEXP = 1, 5
AXIS_ALL, AXIS_ROW = 1, 2
RED_NONE, RED_SUM, RED_MEAN, RED_BATCHMEAN = 0, 1, 2, 3
KL_INPUT_IS_PROB = 2
KL_INPUT_LOGITS, KL_TARGET_LOGITS = 4, 8
DIST_NORMAL = 3


class View(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_int64), ("rows", C.c_int64), ("cols", C.c_int64),
                ("stride", C.c_int64), ("dtype", C.c_int)]


class Rng(C.Structure):
    _fields_ = [("seed", C.c_uint64), ("subsequence", C.c_uint64), ("offset", C.c_uint64)]


def load(path):
    lib = C.CDLL(path)
    lib.tally_context_create.argtypes = [C.c_int, C.c_int, C.POINTER(C.c_void_p)]
    lib.tally_context_release.argtypes = [C.c_void_p]
    lib.tally_context_device_name.argtypes = [C.c_void_p]
    lib.tally_context_device_name.restype = C.c_char_p
    lib.tally_last_error.argtypes = [C.c_void_p]
    lib.tally_last_error.restype = C.c_char_p
    lib.tally_sync.argtypes = [C.c_void_p]
    lib.tally_buffer_create.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p)]
    lib.tally_buffer_release.argtypes = [C.c_void_p]
    lib.tally_buffer_upload.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t]
    lib.tally_buffer_download.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t]
    lib.tally_view_f32.argtypes = [C.c_void_p, C.c_int64, C.c_int64, C.c_int64]
    lib.tally_view_f32.restype = View
    lib.tally_reduce.argtypes = [C.c_void_p, C.c_int, C.c_int, View, View]
    lib.tally_kl_div.argtypes = [C.c_void_p, View, View, C.c_int, C.c_uint, View]
    lib.tally_dirichlet_multinomial.argtypes = [C.c_void_p, View, View, C.c_int, C.c_uint, View]
    lib.tally_rng_fill.argtypes = [C.c_void_p, C.c_int, Rng, View, C.POINTER(C.c_uint64)]
    return lib


def best_ms(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


class Tally:
    def __init__(self, lib, backend):
        self.lib = lib
        self.ctx = C.c_void_p()
        st = lib.tally_context_create(BACKENDS[backend], -1, C.byref(self.ctx))
        if st != 0:
            raise RuntimeError(lib.tally_last_error(None).decode())
        self.bufs = []
        self.device = lib.tally_context_device_name(self.ctx).decode()

    def array(self, a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        b = C.c_void_p()
        self.check(self.lib.tally_buffer_create(self.ctx, max(a.nbytes, 4), C.byref(b)))
        self.check(self.lib.tally_buffer_upload(b, 0, a.ctypes.data, a.nbytes))
        self.bufs.append(b)
        rows, cols = a.shape if a.ndim == 2 else (1, a.size)
        return self.lib.tally_view_f32(b, 0, rows, cols)

    def read(self, v, n):
        out = np.empty(n, dtype=np.float32)
        self.check(self.lib.tally_buffer_download(v.buffer, 0, out.ctypes.data, out.nbytes))
        return out

    def check(self, st):
        if st != 0:
            raise RuntimeError(self.lib.tally_last_error(self.ctx).decode())

    def run(self, call):
        def f():
            self.check(call())
            self.check(self.lib.tally_sync(self.ctx))
        return f

    def close(self):
        for b in self.bufs:
            self.lib.tally_buffer_release(b)
        self.lib.tally_context_release(self.ctx)


def workloads(rng):
    """name -> (inputs, numpy callables (the fastest is the baseline), tally call maker)."""
    R, V = 4096, 16384
    p = rng.random((R, V), dtype=np.float32) + np.float32(1e-3)
    p /= p.sum(axis=1, keepdims=True)
    t = rng.random((R, V), dtype=np.float32) + np.float32(1e-3)
    t /= t.sum(axis=1, keepdims=True)
    x26 = rng.standard_normal(1 << 26, dtype=np.float32)
    xl = rng.standard_normal((R, V), dtype=np.float32)
    yl = rng.standard_normal((R, V), dtype=np.float32)
    counts = rng.integers(0, 8, size=(4096, 1024)).astype(np.float32)
    log_alpha = rng.standard_normal((1, 1024), dtype=np.float32) * np.float32(0.5)
    gen = np.random.default_rng(1)

    def kl_np():
        return np.float32(np.sum(t * (np.log(t) - np.log(p)), dtype=np.float32) / R)

    def kl_scipy():
        return np.float32(sps.rel_entr(t, p).sum(dtype=np.float32) / R)

    def lse_np():
        m = xl.max(axis=1, keepdims=True)
        return np.log(np.exp(xl - m).sum(axis=1)) + m[:, 0]

    def lse_scipy():
        return sps.logsumexp(xl, axis=1)

    def dm_math():
        # The same formula in float64 through math.lgamma, element by element: the check value
        # where SciPy is missing (too slow to stand as a baseline).
        lg = np.vectorize(math.lgamma, otypes=[np.float64])
        a = np.exp(log_alpha.astype(np.float64))
        c = counts.astype(np.float64)
        A = a.sum()
        N = c.sum(axis=1)
        S = (lg(c + a) - lg(a)).sum(axis=1)
        return lg(A) - lg(N + A) + S

    def dm_np():
        a = np.exp(log_alpha)
        A = a.sum()
        N = counts.sum(axis=1)
        S = (sps.gammaln(counts + a) - sps.gammaln(a)).sum(axis=1)
        return sps.gammaln(A) - sps.gammaln(N + A) + S

    def normal_np():
        return gen.standard_normal(1 << 26, dtype=np.float32)

    def kl_logits_np():
        # F.kl_div(F.log_softmax(x), F.softmax(y)) written in NumPy float32.
        lq = xl - xl.max(axis=1, keepdims=True)
        lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
        lt = yl - yl.max(axis=1, keepdims=True)
        lt -= np.log(np.exp(lt).sum(axis=1, keepdims=True))
        return np.float32(np.sum(np.exp(lt) * (lt - lq), dtype=np.float32) / R)

    def kl_logits_t(T):
        vi, vt, vo = T.array(xl), T.array(yl), T.array(np.zeros(1))
        flags = KL_INPUT_LOGITS | KL_TARGET_LOGITS
        return T.run(lambda: T.lib.tally_kl_div(T.ctx, vi, vt, RED_BATCHMEAN, flags, vo)), (vo, 1)

    def kl_t(T):
        vi, vt, vo = T.array(p), T.array(t), T.array(np.zeros(1))
        return T.run(lambda: T.lib.tally_kl_div(T.ctx, vi, vt, RED_BATCHMEAN, KL_INPUT_IS_PROB, vo)), (vo, 1)

    def sum_t(T):
        vx, vo = T.array(x26), T.array(np.zeros(1))
        return T.run(lambda: T.lib.tally_reduce(T.ctx, SUM, AXIS_ALL, vx, vo)), (vo, 1)

    def lse_t(T):
        vx, vo = T.array(xl), T.array(np.zeros(R))
        return T.run(lambda: T.lib.tally_reduce(T.ctx, LOGSUMEXP, AXIS_ROW, vx, vo)), (vo, R)

    def dm_t(T):
        vc, va, vo = T.array(counts), T.array(log_alpha), T.array(np.zeros(4096))
        return T.run(lambda: T.lib.tally_dirichlet_multinomial(T.ctx, vc, va, RED_NONE, 0, vo)), (vo, 4096)

    def normal_t(T):
        vo = T.array(np.zeros(1 << 26))
        consumed = C.c_uint64()
        return T.run(lambda: T.lib.tally_rng_fill(T.ctx, DIST_NORMAL, Rng(1, 0, 0), vo, C.byref(consumed))), \
            (vo, 1 << 26)

    scipy = sps is not None
    return [
        ("KL batchmean 4096x16384 input_is_prob", {"numpy": kl_np, **({"scipy rel_entr": kl_scipy} if scipy else {})},
         kl_t, kl_np),
        ("sum of 2^26", {"numpy sum": lambda: x26.sum()}, sum_t, lambda: np.float64(x26.astype(np.float64).sum())),
        ("row logsumexp 4096x16384", {"numpy": lse_np, **({"scipy logsumexp": lse_scipy} if scipy else {})}, lse_t,
         lse_np),
        ("Dirichlet-multinomial 4096x1024", {"scipy gammaln": dm_np} if scipy else {}, dm_t,
         dm_np if scipy else dm_math),
        ("normal fill 2^26", {"numpy.random": normal_np}, normal_t, None),
        ("KL batchmean 4096x16384 from logits", {"numpy": kl_logits_np}, kl_logits_t, kl_logits_np),
    ]


def ratio_text(entry):
    return f" ({entry['ratio']:.2f}x)" if entry.get("ratio") else ""


def bandwidth(repeat):
    """The machine's memory bandwidth as NumPy sees it: one thread, then every core (one
    contiguous slice per thread; copyto and fill release the GIL), the denominator of the
    issue's "near the memory bandwidth" targets."""
    src = np.ones(1 << 26, dtype=np.float32)
    dst = np.empty_like(src)
    copy = best_ms(lambda: np.copyto(dst, src), repeat)
    fill = best_ms(lambda: dst.fill(0.0), repeat)
    nbytes = src.nbytes
    threads = os.cpu_count() or 1
    edges = [len(src) * i // threads for i in range(threads + 1)]
    slices = [slice(edges[i], edges[i + 1]) for i in range(threads)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        def each(fn):
            list(pool.map(fn, slices))
        copy_mt = best_ms(lambda: each(lambda s: np.copyto(dst[s], src[s])), repeat)
        fill_mt = best_ms(lambda: each(lambda s: dst[s].fill(0.0)), repeat)
    return {"copy_ms": copy, "copy_GBps": 2 * nbytes / copy / 1e6, "fill_ms": fill,
            "fill_GBps": nbytes / fill / 1e6, "bytes": nbytes, "threads": threads,
            "copy_mt_ms": copy_mt, "copy_mt_GBps": 2 * nbytes / copy_mt / 1e6, "fill_mt_ms": fill_mt,
            "fill_mt_GBps": nbytes / fill_mt / 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libtally.so")
    ap.add_argument("--backends", default="host,opencl")
    ap.add_argument("--impls", default="best", help="host implementations to time (TALLY_HOST_IMPL values)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated substrings of workload names")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", action="store_true", help="also print the RESULTS.md table")
    args = ap.parse_args()
    lib = load(args.lib)
    rng = np.random.default_rng(0)
    rows = []
    bw = bandwidth(args.repeat)
    print(f"memory bandwidth (numpy): copy {bw['copy_GBps']:.1f} GB/s (read+write), fill {bw['fill_GBps']:.1f} GB/s; "
          f"{bw['threads']} threads: copy {bw['copy_mt_GBps']:.1f} GB/s, fill {bw['fill_mt_GBps']:.1f} GB/s")
    targets = []
    for b in args.backends.split(","):
        if b == "host":
            targets += [("host", impl) for impl in args.impls.split(",")]
        else:
            targets.append((b, None))
    only = [s for s in args.only.split(",") if s]
    for name, np_fns, tally_fn, ref in workloads(rng):
        if only and not any(s in name for s in only):
            continue
        base = {k: best_ms(f, args.repeat) for k, f in np_fns.items()}
        base_name = min(base, key=base.get) if base else "none (no SciPy)"
        base_ms = base[base_name] if base else None
        row = {"workload": name, "numpy_ms": base_ms, "numpy_impl": base_name, "numpy_all_ms": base,
               "tally": {}}
        for backend, impl in targets:
            label = backend if impl is None else f"host[{impl}]"
            if impl is not None:
                os.environ["TALLY_HOST_IMPL"] = impl
            try:
                T = Tally(lib, backend)
            except RuntimeError as e:
                row["tally"][label] = {"error": str(e)}
                continue
            try:
                fn, (vo, n) = tally_fn(T)
                ms = best_ms(fn, args.repeat)
                got = T.read(vo, n)
                entry = {"ms": ms, "ratio": ms / base_ms if base_ms else None, "device": T.device}
                if ref is not None:
                    want = np.asarray(ref(), dtype=np.float64).ravel()
                    entry["max_rel_err_vs_numpy"] = float(np.max(np.abs(got.astype(np.float64) - want) /
                                                                 np.maximum(np.abs(want), 1e-30)))
                row["tally"][label] = entry
            finally:
                T.close()
                os.environ.pop("TALLY_HOST_IMPL", None)
        rows.append(row)
        line = f"{name:40s} {base_name} " + (f"{base_ms:8.1f} ms" if base_ms else "")
        for label, e in row["tally"].items():
            line += f" | {label} " + (f"{e['ms']:8.1f} ms{ratio_text(e)}" if "ms" in e else e["error"][:60])
        print(line, flush=True)
    if args.markdown:
        labels = []
        for r in rows:
            for label in r["tally"]:
                if label not in labels:
                    labels.append(label)
        print()
        print("| workload | NumPy/SciPy float32 | " + " | ".join(labels) + " |")
        print("|---|---|" + "---|" * len(labels))
        for r in rows:
            cells = []
            for label in labels:
                e = r["tally"].get(label, {})
                cells.append(f"{e['ms']:.1f} ms{ratio_text(e)}" if "ms" in e else "n/a")
            numpy_cell = f"{r['numpy_ms']:.1f} ms ({r['numpy_impl']})" if r["numpy_ms"] else r["numpy_impl"]
            print(f"| {r['workload']} | {numpy_cell} | " + " | ".join(cells) + " |")
        print(f"\nmemory bandwidth probe (NumPy, 2^26 float32): copy {bw['copy_ms']:.1f} ms "
              f"({bw['copy_GBps']:.1f} GB/s read+write), fill {bw['fill_ms']:.1f} ms ({bw['fill_GBps']:.1f} GB/s); "
              f"on {bw['threads']} threads: copy {bw['copy_mt_ms']:.1f} ms ({bw['copy_mt_GBps']:.1f} GB/s), "
              f"fill {bw['fill_mt_ms']:.1f} ms ({bw['fill_mt_GBps']:.1f} GB/s)")
    if args.json:
        info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True).stdout.strip(),
                "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                   if l.startswith("model name")), "?"),
                "numpy": np.__version__, "host_threads": os.environ.get("TALLY_HOST_THREADS", "default"),
                "repeat": args.repeat, "loadavg_after": os.getloadavg(),
                "bandwidth": bw, "rows": rows}
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
