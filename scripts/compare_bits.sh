#!/usr/bin/env bash
# Checks that a change kept every result bit: runs the same ops, on the same
# inputs, through two builds of the CLI (say the merge base's and the
# branch's) and compares what they print (%.9g, which round-trips fp32).
#
#   bash scripts/compare_bits.sh OLD/tools/tally NEW/tools/tally [BACKEND...]
#
# BACKENDs default to host (with the vector kernels), host_scalar (the host
# with TALLY_HOST_IMPL=scalar) and opencl; name cuda to add it on a GPU
# machine. NEW_BACKEND:OLD_BACKEND runs NEW on one backend and OLD on
# another: with the same binary twice, `cuda:host opencl:host` checks that a
# GPU gives the host's bits (TALLY_DEVICE picks the OpenCL device).
# Each op runs on odd shapes, two-level trees (300001 columns), every
# reduction and flag, shared and per-row alpha, the mixture and its
# gradients, and the random ops with non-zero seed, subsequence and offset.
# Needs python3 with NumPy for the inputs. Exit 0: every output identical.
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 OLD_TALLY NEW_TALLY [host|host_scalar|opencl|cuda|NEW_BACKEND:OLD_BACKEND ...]" >&2
    exit 2
fi
old=$(realpath "$1") new=$(realpath "$2")
shift 2
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(host host_scalar opencl)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

python3 - <<'EOF' || exit 1
import numpy as np
rng = np.random.default_rng(7)
def put(name, a):
    np.asarray(a, dtype='<f4').tofile(name)
p = rng.random((37, 1031)) + 1e-3
p /= p.sum(1, keepdims=True)
q = rng.random((37, 1031)) + 1e-3
q /= q.sum(1, keepdims=True)
put('x.bin', rng.standard_normal((37, 1031)) * 3)
put('big.bin', rng.standard_normal((3, 300001)))
put('p.bin', p)
put('q.bin', q)
put('lp.bin', np.log(p))
put('gkl.bin', rng.standard_normal((37, 1031)))
put('g1.bin', [0.7])
put('counts.bin', rng.integers(0, 9, (19, 77)))
put('la.bin', rng.standard_normal(77) * 0.5)
put('lab.bin', rng.standard_normal((19, 77)) * 0.5)
put('gdm.bin', rng.standard_normal(19))
put('z.bin', rng.standard_normal((13, 65)))
put('mu.bin', rng.standard_normal((13, 3 * 65)))
put('lv.bin', rng.standard_normal((13, 3 * 65)) * 0.3)
put('lg.bin', rng.standard_normal(3))
put('glq.bin', rng.standard_normal(13))
put('gz.bin', rng.standard_normal((13, 65)))
EOF

# Every op of the list, through tally binary $1 on backend $2.
ops() {
    local t=$1 b=$2
    r() { echo "== $*"; "$t" run "$@" --backend "$b" 2>&1; }
    local kl="--rows 37 --cols 1031" dm="--rows 19 --cols 77" gmm="--batch 13 --components 3 --dim 65"
    local gmmin="--in mu=mu.bin --in log_var=lv.bin --in logits=lg.bin"
    for op in sum mean min max logsumexp sumsq; do
        for axis in all row; do
            r $op --in x=x.bin $kl --axis $axis
            r $op --in x=big.bin --rows 3 --cols 300001 --axis $axis
        done
    done
    for red in none sum mean batchmean; do
        local g=g1.bin
        [ $red = none ] && g=gkl.bin
        r kl_div --in input=lp.bin --in target=q.bin $kl --reduction $red
        r kl_div --in input=p.bin --in target=lp.bin $kl --reduction $red --input-is-prob --log-target
        r kl_div_backward --in input=lp.bin --in target=q.bin --in grad_out=$g $kl --reduction $red
    done
    for red in none sum mean; do
        r dirichlet_multinomial --in counts=counts.bin --in log_alpha=la.bin $dm --reduction $red --with-coefficient
        r dirichlet_multinomial --in counts=counts.bin --in log_alpha=lab.bin $dm --reduction $red --per-row-alpha
    done
    r dirichlet_multinomial_backward --in counts=counts.bin --in log_alpha=la.bin --in grad_out=gdm.bin $dm
    r dirichlet_multinomial_backward --in counts=counts.bin --in log_alpha=lab.bin --in grad_out=gdm.bin $dm \
        --per-row-alpha
    r gmm_log_prob --in z=z.bin $gmmin $gmm
    r gmm_log_prob_backward --in z=z.bin $gmmin --in grad_log_q=glq.bin $gmm
    r gmm_sample $gmmin $gmm --seed 5 --subsequence 2 --offset 8
    r gmm_sample_backward $gmmin --in grad_z=gz.bin --in grad_log_q=glq.bin $gmm --seed 5
    for dist in raw uniform normal; do r rng --dist $dist --count 1001 --seed 9 --offset 4; done
    r categorical --in weights=p.bin $kl --seed 3
    r categorical --in weights=lp.bin $kl --seed 3 --logits
}

# Runs the ops through tally binary $1 on backend $2 (host_scalar: the host
# backend's scalar path).
ops_on() {
    if [ "$2" = host_scalar ]; then TALLY_HOST_IMPL=scalar ops "$1" host; else ops "$1" "$2"; fi
}

status=0
for b in "${backends[@]}"; do
    new_backend=${b%%:*} old_backend=${b#*:}
    ops_on "$old" "$old_backend" > "old_$b.txt"
    ops_on "$new" "$new_backend" > "new_$b.txt"
    runs=$(grep -c '^==' "new_$b.txt") values=$(grep -vc '^==' "new_$b.txt")
    failed=$(grep -c '^error' "new_$b.txt")
    if cmp -s "old_$b.txt" "new_$b.txt"; then
        echo "$b: identical ($runs runs, $values output lines, $failed of them errors)"
    else
        echo "$b: DIFFERENT; first differences:"
        diff "old_$b.txt" "new_$b.txt" | head -20
        status=1
    fi
done
exit $status
