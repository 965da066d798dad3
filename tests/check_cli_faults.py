#!/usr/bin/env python3
"""tests/check_cli_faults.py - `tally run` under faults (issue 15).

- Outputs are all or nothing: under a file-size limit (ulimit -f), or when a
  later --out cannot be created, the command fails with IO_ERROR, leaves no
  output and no temporary behind, and files it would have replaced keep their
  old bytes.
- A large rng output is streamed in pieces: its bytes equal the same stream
  generated in separate small calls at the matching offsets, and stdout and
  file outputs agree.
- Issue 15's reproducer (dirichlet_multinomial with 2^62 + 1 rows of zero
  columns) fails with SIZE_OVERFLOW on the host and, where present, OpenCL.

Usage: check_cli_faults.py PATH_TO_TALLY
"""
import os
import resource
import struct
import subprocess
import sys
import tempfile

TALLY = sys.argv[1]
failures = []


def run(args, limit_bytes=None):
    def limit():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run([TALLY] + args, capture_output=True, text=True, preexec_fn=limit, timeout=600)


def check(cond, what, proc=None):
    if not cond:
        detail = f" (exit {proc.returncode}; stderr: {proc.stderr.strip()[:300]})" if proc is not None else ""
        failures.append(what + detail)
        print("FAIL:", what + detail)
    else:
        print("ok:", what)


def leftovers(d):
    return sorted(n for n in os.listdir(d) if ".tmp-" in n)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


with tempfile.TemporaryDirectory(prefix="tally-cli-faults-") as d:
    out = os.path.join(d, "x.bin")

    # 1. A file-size limit below the output: nothing appears.
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "300000", "--out", f"x={out}"],
            limit_bytes=100 * 1024)
    check(p.returncode == 1 and "IO_ERROR" in p.stderr, "ulimit -f: exit 1 with IO_ERROR", p)
    check(not os.path.exists(out), "ulimit -f: no truncated output file")
    check(leftovers(d) == [], f"ulimit -f: no temporary left ({leftovers(d)})")

    # 2. The same with a file already there: it keeps its bytes.
    write(out, b"OLD!")
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "300000", "--out", f"x={out}"],
            limit_bytes=100 * 1024)
    check(p.returncode == 1 and read(out) == b"OLD!", "ulimit -f: the existing file is untouched", p)
    check(leftovers(d) == [], "ulimit -f: no temporary left (existing file)")

    # 3. Multi-output op whose last --out cannot be created: none is written.
    mu = os.path.join(d, "mu.bin")
    lv = os.path.join(d, "lv.bin")
    write(mu, struct.pack("<4f", 0.5, -1.0, 2.0, 0.25))
    write(lv, struct.pack("<4f", 0.0, 0.1, -0.2, 0.3))
    z = os.path.join(d, "z.bin")
    c = os.path.join(d, "c.bin")
    write(z, b"OLDZ")
    args = ["run", "gmm_sample", "--backend", "host", "--batch", "2", "--components", "1", "--dim", "2",
            "--in", f"mu={mu}", "--in", f"log_var={lv}", "--out", f"z={z}", "--out", f"component={c}",
            "--out", f"log_q={d}/no/such/dir/q.bin"]
    p = run(args)
    check(p.returncode == 1 and "IO_ERROR" in p.stderr, "a later --out fails: exit 1 with IO_ERROR", p)
    check(read(z) == b"OLDZ", "a later --out fails: the earlier output's old file is untouched")
    check(not os.path.exists(c), "a later --out fails: no other output created")
    check(leftovers(d) == [], "a later --out fails: no temporary left")
    # ... and with every path good, all three appear (mode as a new file's).
    args[-1] = f"log_q={d}/q.bin"
    p = run(args)
    check(p.returncode == 0 and len(read(z)) == 16 and len(read(c)) == 8 and len(read(f"{d}/q.bin")) == 8,
          "gmm_sample: all three outputs written", p)
    mask = os.umask(0)
    os.umask(mask)
    check(os.stat(c).st_mode & 0o777 == 0o666 & ~mask, "outputs get the mode of a new file")

    # 3b. Targets that are not regular files are written in place, never
    # replaced: /dev/null stays a device, a symlink stays a link to the new bytes.
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "16", "--out", "x=/dev/null"])
    check(p.returncode == 0 and os.path.exists("/dev/null") and not os.path.isfile("/dev/null"),
          "--out /dev/null: written, still a device", p)
    real = os.path.join(d, "real.bin")
    link = os.path.join(d, "link.bin")
    write(real, b"OLD!")
    os.symlink(real, link)
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "4", "--out", f"x={link}"])
    check(p.returncode == 0 and os.path.islink(link) and len(read(real)) == 16,
          "--out through a symlink: the link stays, its file holds the output", p)
    check(leftovers(d) == [], "symlink target: no temporary left")

    # 4. Streamed rng: 2^20-element pieces tile the stream exactly.
    piece = 1 << 20
    count = 2 * piece + 7
    for dist in ("raw", "uniform", "normal"):
        big = os.path.join(d, f"big_{dist}.bin")
        p = run(["run", "rng", "--backend", "host", "--dist", dist, "--count", str(count), "--seed", "11",
                 "--offset", "3", "--out", f"x={big}"])
        check(p.returncode == 0 and p.stdout.strip() == f"consumed {count + 1}",
              f"rng {dist}: {count} elements streamed, consumed {count + 1}", p)
        whole = read(big)
        parts = b""
        for start, n in ((0, piece), (piece, piece), (2 * piece, 7)):
            part = os.path.join(d, f"part_{dist}.bin")
            p = run(["run", "rng", "--backend", "host", "--dist", dist, "--count", str(n), "--seed", "11",
                     "--offset", str(3 + start), "--out", f"x={part}"])
            parts += read(part)
        check(whole == parts, f"rng {dist}: pieces equal separate calls at their offsets")
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "9", "--seed", "11", "--offset", "3"])
    printed = [int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("x[")]
    check(printed == list(struct.unpack("<9I", read(os.path.join(d, "big_raw.bin"))[:36])),
          "rng: stdout and file outputs agree")
    p = run(["run", "rng", "--backend", "host", "--dist", "raw", "--count", "8", "--offset",
             str(2**64 - 4)])
    check(p.returncode == 1 and "RNG_EXHAUSTED" in p.stderr, "rng past 2^64: RNG_EXHAUSTED before any output", p)

    # 5. Issue 15's reproducer on every backend that is present.
    for backend in ("host", "opencl"):
        p = run(["run", "dirichlet_multinomial", "--backend", backend, "--rows", "4611686018427387905", "--cols",
                 "0", "--reduction", "sum", "--in", "counts=/dev/null", "--in", "log_alpha=/dev/null"])
        if backend != "host" and ("NO_DEVICE" in p.stderr or "LIBRARY_MISSING" in p.stderr
                                  or "BACKEND_NOT_COMPILED" in p.stderr):
            print(f"skip: {backend} is not available")
            continue
        check(p.returncode == 1 and "SIZE_OVERFLOW" in p.stderr,
              f"reproducer on {backend}: exit 1 with SIZE_OVERFLOW", p)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
