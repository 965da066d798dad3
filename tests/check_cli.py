#!/usr/bin/env python3
"""tests/check_cli.py - the `tally` command-line tool, run as a user would.

Usage: check_cli.py PATH_TO_TALLY

Checks the contract of `tally run` (tally run --help): argument errors print
one line and where --help is, and exit 2; a run prints 'NAME VALUE' lines (9 significant digits)
or writes raw little-endian files with --out; a library error exits 1 and
names its status. Expected values come from Python's own arithmetic (and an
independent Philox4x32-10 for the raw stream), never from the library.
Runs on the host backend (TALLY_BACKEND=host) unless a test names one.
"""
import math
import os
import struct
import subprocess
import sys
import tempfile

TALLY = sys.argv[1] if len(sys.argv) > 1 else "tally"
failures = []
checks = 0


def f32(v):
    """v rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def run(args, env_backend="host"):
    env = dict(os.environ)
    env.pop("TALLY_DEVICE", None)
    if env_backend is None:
        env.pop("TALLY_BACKEND", None)
    else:
        env["TALLY_BACKEND"] = env_backend
    p = subprocess.run([TALLY] + args, capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, detail=""):
    global checks
    checks += 1
    if not cond:
        failures.append(what + (": " + detail if detail else ""))
        print("FAIL", what, detail)
    else:
        print("ok  ", what)


def write_f32(path, values):
    with open(path, "wb") as f:
        f.write(struct.pack("<%df" % len(values), *values))


def read_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    return list(struct.unpack("<%df" % (len(data) // 4), data))


def parse_lines(out):
    """'NAME VALUE' lines -> dict name -> value string."""
    values = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            values[parts[0]] = parts[1]
    return values


def philox4x32_10(ctr, key):
    """Philox4x32-10 (Salmon et al., SC'11), written from the paper."""
    c = list(ctr)
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & 0xFFFFFFFF, p1 & 0xFFFFFFFF,
             ((p0 >> 32) ^ c[3] ^ k1) & 0xFFFFFFFF, p0 & 0xFFFFFFFF]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def stream_raw(seed, sub, i):
    q = i // 4
    block = philox4x32_10([q & 0xFFFFFFFF, q >> 32, sub & 0xFFFFFFFF, sub >> 32],
                          [seed & 0xFFFFFFFF, seed >> 32])
    return block[i % 4]


def usage_error(args, what):
    rc, out, err = run(args)
    check(rc == 2, what + ": exit 2", "rc=%d stderr=%r" % (rc, err[:200]))
    lines = err.strip().splitlines()
    check(len(lines) == 2 and lines[0].startswith("tally: ") and lines[1].startswith("see 'tally"),
          what + ": one error line and where --help is", repr(err[:300]))


def main():
    tmp = tempfile.mkdtemp(prefix="tally_cli_")
    x_path = os.path.join(tmp, "x.f32")
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]
    write_f32(x_path, x)

    # ---- argument errors: usage and exit 2 ----
    # ---- help and version: -h and --help on every command, -V ----
    for cmd in ["info", "run", "crosscheck", "demo"]:
        for flag in ["-h", "--help"]:
            rc, out, err = run([cmd, flag])
            check(rc == 0 and "usage" in out and err == "", "%s %s prints its usage" % (cmd, flag),
                  "rc=%d out=%r err=%r" % (rc, out[:80], err[:200]))
    for flag in ["-V", "--version", "version"]:
        rc, out, err = run([flag])
        check(rc == 0 and out.strip().count(".") == 2, "tally %s prints the version" % flag, repr(out))
    usage_error(["run", "sum", "--rows"], "option without its value")
    rc, out, err = run(["run", "sum", "--bogus"])
    check("see 'tally run --help'" in err, "run's errors point at run --help", repr(err))

    # ---- the demo's headline: AUTO's choice, every usable backend, bits compared ----
    rc, out, err = run(["demo", "--kl-rows", "64"], env_backend=None)
    check(rc == 0 and "auto picks " in out and "Result bits on every backend" in out,
          "demo names AUTO's pick and compares backends", "rc=%d err=%r" % (rc, err[-300:]))
    check("THE BITS DIFFER" not in out, "demo: no backend differs", out[-600:])
    check(all(("  %-6s:" % b) in out for b in ["cuda", "opencl", "host"]),
          "demo says for each backend whether it is usable", out[:600])

    usage_error([], "no command")
    usage_error(["frobnicate"], "unknown command")
    usage_error(["run"], "run without an op")
    usage_error(["run", "frobnicate"], "unknown op")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--cols", "3"], "missing --rows")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "two", "--cols", "3"], "bad --rows")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--axis", "diagonal"],
                "bad --axis")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--bogus"], "unknown option")
    usage_error(["run", "sum", "--in", x_path, "--rows", "2", "--cols", "3"], "--in without NAME=")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "4"], "file of the wrong size")
    usage_error(["run", "sum", "--in", "q=" + x_path, "--rows", "2", "--cols", "3"], "unknown input name")
    usage_error(["run", "sum", "--rows", "2", "--cols", "3"], "missing input")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--backend", "abacus"],
                "bad --backend")
    usage_error(["run", "rng", "--dist", "gaussian", "--count", "4"], "bad --dist")
    usage_error(["run", "kl_div", "--in", "input=" + x_path, "--in", "target=" + x_path, "--rows", "2",
                 "--cols", "3", "--reduction", "median"], "bad --reduction")

    # ---- printed scalars ----
    rc, out, err = run(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--axis", "all"])
    check(rc == 0, "sum: exit 0", err)
    check(out.splitlines()[:1] == ["y 21.5"], "sum prints 'y 21.5'", repr(out))

    rc, out, err = run(["run", "sum", "--backend", "host", "--in", "x=" + x_path, "--rows", "2", "--cols", "3"])
    check(rc == 0 and parse_lines(out).get("y") == "21.5", "sum with --backend host, default axis all", repr(out))

    rc, out, err = run(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--axis", "row"])
    v = parse_lines(out)
    check(rc == 0 and v.get("y[0]") == "6" and v.get("y[1]") == "15.5", "sum by row", repr(out))

    rc, out, err = run(["run", "mean", "--in", "x=" + x_path, "--rows", "2", "--cols", "3"])
    want = f32(f32(21.5) / f32(6.0))  # correctly rounded float division
    got = parse_lines(out).get("y")
    check(rc == 0 and got is not None and f32(float(got)) == want, "mean = 21.5/6 rounded to float",
          "%r vs %.9g" % (got, want))

    for op, want in (("min", 1.0), ("max", 6.5), ("sumsq", 1 + 4 + 9 + 16 + 25 + 42.25)):
        rc, out, err = run(["run", op, "--in", "x=" + x_path, "--rows", "3", "--cols", "2"])
        got = parse_lines(out).get("y")
        check(rc == 0 and got is not None and float(got) == want, op, "%r vs %r" % (got, want))

    rc, out, err = run(["run", "logsumexp", "--in", "x=" + x_path, "--rows", "1", "--cols", "6"])
    want = math.log(sum(math.exp(t) for t in x))
    got = parse_lines(out).get("y")
    check(rc == 0 and got is not None and abs(float(got) - want) < 1e-5, "logsumexp", "%r vs %r" % (got, want))

    # ---- --out writes raw little-endian files ----
    y_path = os.path.join(tmp, "y.f32")
    rc, out, err = run(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--axis", "all",
                        "--out", "y=" + y_path])
    check(rc == 0, "sum --out: exit 0", err)
    check(os.path.exists(y_path) and os.path.getsize(y_path) == 4, "sum --out writes 4 bytes")
    check(os.path.exists(y_path) and read_f32(y_path) == [21.5], "sum --out holds 21.5")
    check("y " not in out, "nothing printed for an output written to a file", repr(out))
    rc, out, err = run(["run", "max", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--axis", "row",
                        "--out", "y=" + y_path])
    check(rc == 0 and read_f32(y_path) == [3.0, 6.5], "max by row --out", repr(read_f32(y_path)))

    # ---- kl_div ----
    inp = [math.log(p) for p in (0.2, 0.3, 0.5, 0.1, 0.1, 0.8)]
    tgt = [0.25, 0.25, 0.5, 0.0, 0.5, 0.5]
    in_path, tg_path = os.path.join(tmp, "in.f32"), os.path.join(tmp, "tg.f32")
    write_f32(in_path, inp)
    write_f32(tg_path, tgt)
    inp32, tgt32 = [f32(t) for t in inp], [f32(t) for t in tgt]
    terms = [t * (math.log(t) - i) if t > 0 else 0.0 for i, t in zip(inp32, tgt32)]
    for red, div in (("sum", 1), ("mean", 6), ("batchmean", 2)):
        rc, out, err = run(["run", "kl_div", "--in", "input=" + in_path, "--in", "target=" + tg_path, "--rows",
                            "2", "--cols", "3", "--reduction", red])
        got = parse_lines(out).get("y")
        want = sum(terms) / div
        check(rc == 0 and got is not None and abs(float(got) - want) < 1e-6, "kl_div " + red,
              "%r vs %r (%s)" % (got, want, err))
    rc, out, err = run(["run", "kl_div", "--in", "input=" + in_path, "--in", "target=" + tg_path, "--rows", "2",
                        "--cols", "3", "--reduction", "none", "--out", "y=" + y_path])
    got = read_f32(y_path) if rc == 0 else []
    check(rc == 0 and len(got) == 6 and all(abs(a - b) < 1e-6 for a, b in zip(got, terms)), "kl_div none --out",
          repr(got))
    # From logits: kl_div(log_softmax(x), softmax(y)) per row, and each side alone.
    xl, yl = [0.5, -1.0, 2.0, 3.0, 3.0, -2.0], [1.0, 0.0, -1.0, -0.5, 2.5, 0.25]
    xl_path, yl_path = os.path.join(tmp, "xl.f32"), os.path.join(tmp, "yl.f32")
    write_f32(xl_path, xl)
    write_f32(yl_path, yl)

    def log_softmax(v):
        out = []
        for r in range(2):
            row = v[3 * r:3 * r + 3]
            m = max(row)
            lse = m + math.log(sum(math.exp(z - m) for z in row))
            out += [z - lse for z in row]
        return out

    lq, lt = log_softmax(xl), log_softmax(yl)
    for opts, q_side, t_side in ((["--input-logits", "--target-logits"], lq, lt), (["--input-logits"], lq, None),
                                 (["--target-logits"], xl, lt)):
        # A side without its flag is read as given: target probabilities yl would be negative, so the
        # input-logits case takes softmax(yl) as its target file.
        t_probs = [math.exp(v) for v in lt]
        tfile = yl_path if t_side is not None else os.path.join(tmp, "tp.f32")
        if t_side is None:
            write_f32(tfile, t_probs)
        tvals = [f32(v) for v in t_probs] if t_side is None else t_probs
        tlogs = [math.log(v) for v in tvals]
        want = sum(t * (l - q) for t, l, q in zip(tvals, tlogs, q_side)) / 2
        rc, out, err = run(["run", "kl_div", "--in", "input=" + xl_path, "--in", "target=" + tfile, "--rows", "2",
                            "--cols", "3", "--reduction", "batchmean"] + opts)
        got = parse_lines(out).get("y")
        check(rc == 0 and got is not None and abs(float(got) - want) < 1e-5 * max(1.0, abs(want)),
              "kl_div batchmean " + " ".join(opts), "%r vs %r (%s)" % (got, want, err))
    rc, out, err = run(["run", "kl_div", "--in", "input=" + xl_path, "--in", "target=" + yl_path, "--rows", "2",
                        "--cols", "3", "--target-logits", "--log-target"])
    check(rc == 1 and "TALLY_KL_TARGET_LOGITS" in err, "kl_div --target-logits --log-target is refused", err)
    rc, out, err = run(["run", "kl_div_backward", "--in", "input=" + xl_path, "--in", "target=" + yl_path, "--rows",
                        "2", "--cols", "3", "--input-logits"])
    check(rc == 2 and "--input-logits does not apply" in err, "kl_div_backward takes no --input-logits", err)

    # ---- rng: raw draws equal an independent Philox ----
    seed, sub, off = 42, 7, 3
    rc, out, err = run(["run", "rng", "--dist", "raw", "--count", "6", "--seed", str(seed), "--subsequence",
                        str(sub), "--offset", str(off)])
    v = parse_lines(out)
    want = [stream_raw(seed, sub, off + i) for i in range(6)]
    got = [int(v.get("x[%d]" % i, "-1")) for i in range(6)]
    check(rc == 0 and got == want, "rng raw equals Philox4x32-10", "%r vs %r" % (got, want))
    check(v.get("consumed") == "8", "rng consumed 8", repr(out))
    rc, out, err = run(["run", "rng", "--dist", "uniform", "--count", "4", "--seed", "0x2a"])
    v = parse_lines(out)
    ok = rc == 0
    for i in range(4):
        u = f32(f32(float(stream_raw(42, 0, i))) * 2.0 ** -32 + 2.0 ** -33)
        ok = ok and v.get("x[%d]" % i) is not None and f32(float(v["x[%d]" % i])) == u
    check(ok, "rng uniform equals the float formula", repr(out))

    # ---- library errors: exit 1 and the status name ----
    rc, out, err = run(["run", "rng", "--dist", "uniform", "--count", "1", "--offset", "18446744073709551615"])
    check(rc == 1, "stream past 2^64: exit 1", "rc=%d %r" % (rc, err))
    check("RNG_EXHAUSTED" in err, "stream past 2^64: status name", repr(err))
    empty_path = os.path.join(tmp, "empty.f32")
    write_f32(empty_path, [])
    rc, out, err = run(["run", "mean", "--in", "x=" + empty_path, "--rows", "0", "--cols", "3"])
    check(rc == 1 and "EMPTY_INPUT" in err, "mean of nothing: exit 1 with EMPTY_INPUT", "rc=%d %r" % (rc, err))
    rc, out, err = run(["run", "sum", "--backend", "cuda", "--in", "x=" + x_path, "--rows", "2", "--cols", "3"],
                       env_backend=None)
    if rc == 0:
        check(parse_lines(out).get("y") == "21.5", "sum on cuda (present here)", repr(out))
    else:
        check(rc == 1 and any(s in err for s in ("BACKEND_NOT_COMPILED", "LIBRARY_MISSING", "NO_DEVICE")),
              "absent cuda backend: exit 1 with its status", "rc=%d %r" % (rc, err))

    # ---- half inputs (--dtype): 2-byte files, values widened exactly ----
    # bf16 0x3f80 = 1.0, 0x4040 = 3.0, 0xc0a0 = -5.0, 0x3e00 = 0.125; f16 0x3c00 = 1.0, 0x4200 = 3.0,
    # 0xc500 = -5.0, 0x3000 = 0.125, 0x0001 = 2^-24 (a subnormal).
    bf_path = os.path.join(tmp, "x.bf16")
    with open(bf_path, "wb") as f:
        f.write(struct.pack("<4H", 0x3f80, 0x4040, 0xc0a0, 0x3e00))
    h_path = os.path.join(tmp, "x.f16")
    with open(h_path, "wb") as f:
        f.write(struct.pack("<5H", 0x3c00, 0x4200, 0xc500, 0x3000, 0x0001))
    rc, out, err = run(["run", "sum", "--dtype", "bf16", "--in", "x=" + bf_path, "--rows", "2", "--cols", "2",
                        "--axis", "row"])
    v = parse_lines(out)
    check(rc == 0 and v.get("y[0]") == "4" and v.get("y[1]") == "-4.875", "bf16 sum by row", repr(out) + err)
    rc, out, err = run(["run", "max", "--dtype", "f16", "--in", "x=" + h_path, "--rows", "1", "--cols", "5"])
    check(rc == 0 and parse_lines(out).get("y") == "3", "f16 max", repr(out) + err)
    rc, out, err = run(["run", "min", "--dtype", "f16", "--in", "x=" + h_path, "--rows", "1", "--cols", "5"])
    check(rc == 0 and parse_lines(out).get("y") == "-5", "f16 min", repr(out) + err)
    rc, out, err = run(["run", "sum", "--dtype", "f16", "--in", "x=" + h_path, "--rows", "1", "--cols", "5"])
    check(rc == 0 and parse_lines(out).get("y") == "-0.87499994", "f16 sum with a subnormal", repr(out) + err)
    usage_error(["run", "sum", "--dtype", "bf16", "--in", "x=" + x_path, "--rows", "2", "--cols", "3"],
                "an fp32 file read as bf16 has the wrong size")
    usage_error(["run", "sum", "--dtype", "f64", "--in", "x=" + x_path, "--rows", "2", "--cols", "3"], "bad --dtype")

    # ---- half outputs (--out-dtype): each value the fp32 result rounded to nearest even ----
    # kl_div none with a log target of 0 is exp(0) * (0 - input) = -input exactly, so the fp32 y holds
    # chosen values and the half y their rounding, computed here by Python: struct's 'e' for f16, and
    # for bf16 a rounding of the float32 bits written below.
    def bf16_bits(v):
        u = struct.unpack("<I", struct.pack("<f", v))[0]
        if (u & 0x7fffffff) > 0x7f800000:
            return 0x7fc0
        keep, rest = u >> 16, u & 0xffff
        if rest > 0x8000 or (rest == 0x8000 and keep & 1):
            keep += 1
        return keep & 0xffff

    def f32v(text):
        return f32(float(text))

    def bf16_value(v):
        return struct.unpack("<f", struct.pack("<I", bf16_bits(v) << 16))[0]

    def f16_value(v):
        try:
            return struct.unpack("<e", struct.pack("<e", v))[0]
        except OverflowError:  # struct refuses what rounds beyond 65504: f16 gives infinity
            return math.copysign(math.inf, v)

    vals = [f32(1.0 + 2.0 ** -8), f32(1.0 + 3 * 2.0 ** -8), 3.0, f32(1e5), f32(65519.0), 65520.0, f32(-0.1),
            f32(2.0 ** -25), f32(3 * 2.0 ** -26), f32(1e-30)]
    neg_path, zero_path = os.path.join(tmp, "neg.f32"), os.path.join(tmp, "zero.f32")
    write_f32(neg_path, [-v for v in vals])
    write_f32(zero_path, [0.0] * len(vals))
    kl_args = ["run", "kl_div", "--reduction", "none", "--log-target", "--in", "input=" + neg_path,
               "--in", "target=" + zero_path, "--rows", "1", "--cols", str(len(vals))]
    rc, out, err = run(kl_args)
    got = parse_lines(out)
    check(rc == 0 and all(f32v(got["y[%d]" % i]) == v for i, v in enumerate(vals)),
          "kl_div none with log target 0 gives -input exactly", repr(out) + err)
    for name, narrow in (("bf16", bf16_value), ("f16", f16_value)):
        rc, out, err = run(kl_args + ["--out-dtype", name])
        got = parse_lines(out)
        want = [narrow(v) for v in vals]
        check(rc == 0 and all(f32v(got["y[%d]" % i]) == w for i, w in enumerate(want)),
              "kl_div none --out-dtype %s: every value rounded to nearest even" % name, repr(out) + err)
    y_path = os.path.join(tmp, "y.f16")
    rc, out, err = run(kl_args + ["--out-dtype", "f16", "--out", "y=" + y_path])
    with open(y_path, "rb") as f:
        data = f.read()
    want = b"".join(struct.pack("<e", f16_value(v)) if math.isfinite(f16_value(v)) else struct.pack("<H", 0x7c00)
                    for v in vals)
    check(rc == 0 and data == want, "kl_div none --out-dtype f16 --out: 2-byte little-endian file", repr(data))
    # A fill's half values are its fp32 draws rounded (the same stream elements), as is gmm_sample's z.
    for dist in ("uniform", "normal"):
        rc, out, err = run(["run", "rng", "--dist", dist, "--count", "37", "--seed", "9", "--offset", "5"])
        ref = parse_lines(out)
        for name, narrow in (("bf16", bf16_value), ("f16", f16_value)):
            rc2, out2, err2 = run(["run", "rng", "--dist", dist, "--count", "37", "--seed", "9", "--offset", "5",
                                   "--out-dtype", name])
            got = parse_lines(out2)
            check(rc == 0 and rc2 == 0 and got.get("consumed") == ref.get("consumed") == "40" and
                  all(f32v(got["x[%d]" % i]) == narrow(f32v(ref["x[%d]" % i])) for i in range(37)),
                  "rng %s --out-dtype %s: the fp32 draws rounded" % (dist, name), repr(out2) + err2)
    gmm_args = ["run", "gmm_sample", "--batch", "3", "--components", "1", "--dim", "5", "--seed", "4",
                "--in", "mu=" + os.path.join(tmp, "mu15.f32"), "--in", "log_var=" + os.path.join(tmp, "lv15.f32")]
    write_f32(os.path.join(tmp, "mu15.f32"), [0.1 * i - 0.7 for i in range(15)])
    write_f32(os.path.join(tmp, "lv15.f32"), [0.05 * i - 0.5 for i in range(15)])
    rc, out, err = run(gmm_args)
    ref = parse_lines(out)
    rc2, out2, err2 = run(gmm_args + ["--out-dtype", "bf16"])
    got = parse_lines(out2)
    check(rc == 0 and rc2 == 0 and all(f32v(got["z[%d]" % i]) == bf16_value(f32v(ref["z[%d]" % i]))
                                       for i in range(15)) and
          all(got["log_q[%d]" % b] == ref["log_q[%d]" % b] for b in range(3)) and got["consumed"] == ref["consumed"],
          "gmm_sample --out-dtype bf16: z rounded, log_q and consumed unchanged", repr(out2) + err2)
    usage_error(kl_args[:3] + ["sum"] + kl_args[4:] + ["--out-dtype", "f16"], "--out-dtype f16 on a reduced kl_div")
    usage_error(["run", "rng", "--dist", "raw", "--count", "4", "--out-dtype", "bf16"], "--out-dtype on raw draws")
    usage_error(["run", "sum", "--in", "x=" + x_path, "--rows", "2", "--cols", "3", "--out-dtype", "f16"],
                "--out-dtype on a reduction")
    usage_error(kl_args + ["--out-dtype", "f64"], "bad --out-dtype")
    usage_error(["crosscheck", "--out-dtype", "f64"], "bad crosscheck --out-dtype")

    # ---- help and version ----
    rc, out, err = run(["run", "--help"])
    check(rc == 0 and "usage" in out, "run --help")
    rc, out, err = run(["version"])
    check(rc == 0 and len(out.strip().split(".")) == 3, "version", repr(out))

    print("%d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
