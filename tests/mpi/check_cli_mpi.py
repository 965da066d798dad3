#!/usr/bin/env python3
"""`mpirun -np N tally run OP ... --mpi` writes, on rank 0, output files and
stdout byte-identical to the single-process `tally run OP ...`, at 1 to 4
ranks, under even splits and explicit --split counts with empty ranks and
cuts inside reduction tiles. Also: a bad --split is a usage error (exit 2) on
every rank, and `tally crosscheck --mpi --quick` passes.

usage: check_cli_mpi.py TALLY MPIRUN
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

TALLY, MPIRUN = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", TALLY_BACKEND="host")
failures = []


def write(path, values):
    with open(path, "wb") as f:
        f.write(struct.pack("<%df" % len(values), *values))


def splits(rows, ranks):
    """Explicit row counts: one empty rank first, the rest uneven."""
    rng = random.Random(rows * 31 + ranks)
    cuts = sorted(rng.randint(0, rows) for _ in range(ranks - 1))
    counts = [b - a for a, b in zip([0] + cuts, cuts + [rows])]
    if ranks > 1:
        counts[1] += counts[0]
        counts[0] = 0
    return ",".join(str(c) for c in counts)


def run(cmd):
    return subprocess.run(cmd, env=ENV, capture_output=True, timeout=300)


def main():
    work = tempfile.mkdtemp(prefix="tally-cli-mpi-")
    rnd = random.Random(7)
    R, C = 37, 3001          # 111037 elements: 7 tiles, cut by rows and ranks
    B, K, D = 29, 3, 5
    f = lambda name: os.path.join(work, name)
    write(f("x"), [rnd.uniform(-20, 20) for _ in range(R * C)])
    write(f("p"), [rnd.uniform(0, 1) for _ in range(R * C)])
    write(f("t"), [0.0 if i % 13 == 0 else rnd.uniform(0, 1) for i in range(R * C)])
    write(f("counts"), [float(rnd.randint(0, 7)) for _ in range(40 * 256)])
    write(f("alpha"), [rnd.uniform(-2, 2) for _ in range(256)])
    write(f("alpha_rows"), [rnd.uniform(-2, 2) for _ in range(40 * 256)])
    write(f("mu"), [rnd.uniform(-2, 2) for _ in range(B * K * D)])
    write(f("lv"), [rnd.uniform(-1, 1) for _ in range(B * K * D)])
    write(f("z"), [rnd.uniform(-3, 3) for _ in range(B * D)])
    write(f("logits"), [0.3, -1.0, 0.8])
    write(f("w"), [rnd.uniform(-3, 3) for _ in range(50 * 9)])
    rc = ["--rows", str(R), "--cols", str(C)]
    cases = [  # (name, rows split, args, outputs)
        ("sum", R, ["sum"] + rc + ["--in", "x=" + f("x")], ["y"]),
        ("mean", R, ["mean"] + rc + ["--in", "x=" + f("x")], ["y"]),
        ("min", R, ["min"] + rc + ["--in", "x=" + f("x")], []),
        ("max", R, ["max"] + rc + ["--in", "x=" + f("x")], []),
        ("logsumexp", R, ["logsumexp"] + rc + ["--in", "x=" + f("x")], ["y"]),
        ("sumsq", R, ["sumsq"] + rc + ["--in", "x=" + f("x")], []),
        ("sum row", R, ["sum"] + rc + ["--axis", "row", "--in", "x=" + f("x")], ["y"]),
        ("kl mean prob", R, ["kl_div"] + rc + ["--input-is-prob", "--in", "input=" + f("p"), "--in",
                                               "target=" + f("t")], ["y"]),
        ("kl batchmean", R, ["kl_div"] + rc + ["--reduction", "batchmean", "--in", "input=" + f("x"), "--in",
                                               "target=" + f("t")], []),
        ("kl none", R, ["kl_div"] + rc + ["--reduction", "none", "--log-target", "--in", "input=" + f("x"),
                                          "--in", "target=" + f("p")], ["y"]),
        ("dm sum", 40, ["dirichlet_multinomial", "--rows", "40", "--cols", "256", "--reduction", "sum",
                        "--with-coefficient", "--in", "counts=" + f("counts"), "--in", "log_alpha=" + f("alpha")], []),
        ("dm none per-row", 40, ["dirichlet_multinomial", "--rows", "40", "--cols", "256", "--per-row-alpha",
                                 "--in", "counts=" + f("counts"), "--in", "log_alpha=" + f("alpha_rows")], ["y"]),
        ("dm mean", 40, ["dirichlet_multinomial", "--rows", "40", "--cols", "256", "--reduction", "mean",
                         "--in", "counts=" + f("counts"), "--in", "log_alpha=" + f("alpha")], []),
        ("gmm_log_prob", B, ["gmm_log_prob", "--batch", str(B), "--components", str(K), "--dim", str(D),
                             "--in", "z=" + f("z"), "--in", "mu=" + f("mu"), "--in", "log_var=" + f("lv"),
                             "--in", "logits=" + f("logits")], ["log_q"]),
        ("gmm_sample", B, ["gmm_sample", "--batch", str(B), "--components", str(K), "--dim", str(D),
                           "--seed", "11", "--offset", "8", "--in", "mu=" + f("mu"), "--in", "log_var=" + f("lv"),
                           "--in", "logits=" + f("logits")], ["z", "log_q", "component"]),
        ("rng normal", 1001, ["rng", "--dist", "normal", "--count", "1001", "--seed", "3", "--offset", "5"], ["x"]),
        ("rng raw", 77, ["rng", "--dist", "raw", "--count", "77", "--seed", "3", "--subsequence", "9"], []),
        ("categorical", 50, ["categorical", "--rows", "50", "--cols", "9", "--logits", "--seed", "4",
                             "--in", "weights=" + f("w")], ["index"]),
    ]
    checked = 0
    for name, rows, args, outs in cases:
        single_outs = []
        for o in outs:
            single_outs += ["--out", "%s=%s" % (o, f("single_" + o))]
        ref = run([TALLY, "run"] + args + single_outs)
        if ref.returncode != 0:
            failures.append("%s: single process failed: %s" % (name, ref.stderr.decode()))
            continue
        # Even splits at 1 and 4 ranks, explicit uneven ones (an empty first
        # rank, cuts inside tiles) at 2, 3 and 4: enough for every path while
        # keeping the launches few (each mpirun costs about a second in CI).
        for ranks, split in ((1, None), (2, splits(rows, 2)), (3, splits(rows, 3)), (4, None),
                             (4, splits(rows, 4))):
            if True:
                mpi_outs = []
                for o in outs:
                    mpi_outs += ["--out", "%s=%s" % (o, f("mpi_" + o))]
                    if os.path.exists(f("mpi_" + o)):
                        os.remove(f("mpi_" + o))
                extra = ["--mpi"] + (["--split", split] if split else [])
                got = run([MPIRUN, "--oversubscribe", "-np", str(ranks), TALLY, "run"] + args + mpi_outs + extra)
                label = "%s at %d ranks%s" % (name, ranks, " split " + split if split else "")
                checked += 1
                if got.returncode != 0:
                    failures.append("%s: exit %d: %s" % (label, got.returncode, got.stderr.decode()[-400:]))
                    continue
                if got.stdout != ref.stdout:
                    failures.append("%s: stdout differs:\n%s\nvs single process:\n%s" %
                                    (label, got.stdout.decode()[:300], ref.stdout.decode()[:300]))
                for o in outs:
                    a = open(f("mpi_" + o), "rb").read()
                    b = open(f("single_" + o), "rb").read()
                    if a != b:
                        failures.append("%s: output %s differs (%d vs %d bytes)" % (label, o, len(a), len(b)))
    # A bad split is a usage error on every rank.
    bad = run([MPIRUN, "--oversubscribe", "-np", "2", TALLY, "run", "sum"] + rc +
              ["--in", "x=" + f("x"), "--mpi", "--split", "1,2"])
    checked += 1
    if bad.returncode != 2 or b"--split" not in bad.stderr:
        failures.append("bad --split: exit %d, stderr %s" % (bad.returncode, bad.stderr.decode()[:300]))
    cc = run([MPIRUN, "--oversubscribe", "-np", "3", TALLY, "crosscheck", "--mpi", "--quick"])
    checked += 1
    if cc.returncode != 0 or b"MISMATCH" in cc.stdout or b"bit-identical" not in cc.stdout:
        failures.append("crosscheck --mpi: exit %d\n%s%s" % (cc.returncode, cc.stdout.decode()[-800:],
                                                             cc.stderr.decode()[-400:]))
    for m in failures:
        print("FAIL:", m)
    print("check_cli_mpi: %d runs compared, %d failures" % (checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
