#!/usr/bin/env python3
"""Runs `tally crosscheck --quick --dtype all` (fp32, bf16 and f16 inputs) over the host
and one other backend.

Usage: run_crosscheck.py TALLY_CLI BACKEND

Exits 77 (meson's SKIP) when BACKEND is not compiled in or not available on
this machine, as `tally info --json` reports it; otherwise exits with the
crosscheck's own status (0 only when every output is bit-identical to the
host and within tolerance of float64).
"""
import json
import subprocess
import sys


def main():
    cli, backend = sys.argv[1], sys.argv[2]
    info = json.loads(subprocess.run([cli, "info", "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    entry = next((b for b in info["backends"] if b["name"] == backend), None)
    if entry is None or not entry["available"]:
        reason = entry["reason"] if entry else "unknown backend"
        print(f"SKIP: {backend} is not available: {reason}", file=sys.stderr)
        return 77
    run = subprocess.run([cli, "crosscheck", "--quick", "--dtype", "all", "--backends", f"host,{backend}"])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
