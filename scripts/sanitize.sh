#!/usr/bin/env bash
# scripts/sanitize.sh - the sanitizer job of CI (issue 15), run by scripts/test.sh:
#   1. the whole suite (core, host, PoCL) built with AddressSanitizer +
#      UndefinedBehaviorSanitizer in build-asan (clang when present, else gcc);
#      leaks fail it, except inside PoCL/LLVM (scripts/sanitize.supp);
#   2. with clang, each libFuzzer target of tests/fuzz for TALLY_FUZZ_SECONDS
#      (default 45) from its seed corpus; any crash fails;
#   3. tests/check_threads.c built with ThreadSanitizer in build-tsan, on the
#      host backend (8 threads, a context each).
# TALLY_SANITIZE_STEPS (default "asan fuzz tsan") picks steps. Prints one
# line per step and exits non-zero when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=${TALLY_SANITIZE_STEPS:-asan fuzz tsan}
fuzz_seconds=${TALLY_FUZZ_SECONDS:-45}
cc=gcc
if command -v clang >/dev/null 2>&1; then cc=clang; fi
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
status=0
note() { printf 'sanitize: %s\n' "$*"; }

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$root/scripts/sanitize.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

asan_dir=${TALLY_ASAN_DIR:-build-asan}
if [[ " $steps " == *" asan "* || " $steps " == *" fuzz "* ]]; then
    if [ ! -f "$asan_dir/build.ninja" ]; then
        CC=$cc meson setup "$asan_dir" -Dcuda=disabled -Dbuildtype=debugoptimized \
            -Db_sanitize=address,undefined -Db_lundef=false \
            -Dc_args="-fno-sanitize-recover=undefined -fno-omit-frame-pointer" >/dev/null
    fi
    meson compile -C "$asan_dir" >/dev/null
fi

# The OpenCL suites run with leak detection off: LeakSanitizer's tracer
# thread crashes (SIGSEGV inside StopTheWorld) while suspending PoCL's worker
# threads at exit, which fails a test that has no leak. Every tally code path
# those suites reach on the device side is host C code that the core and
# host suites, which keep leak detection on, also exercise.
#
# Left out to keep CI inside its time: the exhaustive float sweeps of the
# portable math (terms, math, math_device_*), which are arithmetic on
# scalars with no allocation or indexing worth a sanitizer (about 4 minutes
# under ASan on two cores). Also the install test: it links a small program
# against the installed library with the plain system compiler, which an
# instrumented library cannot link without the sanitizer runtime; the
# normal build runs it.
skip_re='/ (terms|math|math_device_[a-z]+|install)$'
run_asan_suites() { # label, extra ASAN_OPTIONS, suites...
    local label=$1 extra=$2 log="$asan_dir/sanitize-$1.log" t0=$SECONDS
    shift 2
    local pattern names=()
    pattern="^tally:($(IFS='|'; echo "$*")) / "
    mapfile -t names < <(meson test -C "$asan_dir" --list 2>/dev/null | grep -E "$pattern" | grep -Ev "$skip_re" |
                         sed 's|^tally:[a-z]* / ||')
    if ASAN_OPTIONS="$ASAN_OPTIONS$extra" meson test -C "$asan_dir" "${names[@]}" --num-processes 2 \
        --timeout-multiplier 3 --print-errorlogs >"$log" 2>&1; then
        note "asan+ubsan ($cc) $label: $(grep -E '^(Ok|Fail|Skipped):' "$log" | tr -s ' \n' ' ') in $((SECONDS - t0)) s"
    else
        status=1
        tail -60 "$log"
        note "asan+ubsan ($cc) $label: FAILED (log: $log)"
    fi
}
if [[ " $steps " == *" asan "* ]]; then
    run_asan_suites core+host "" core host
    run_asan_suites opencl ":detect_leaks=0" opencl
fi

if [[ " $steps " == *" fuzz "* ]]; then
    if [ "$cc" != clang ]; then
        note "fuzz: clang not found; the targets ran as corpus replays in the suite"
    else
        mkdir -p "$asan_dir/fuzz-artifacts"
        for target in fuzz_api fuzz_cli; do
            work=$(mktemp -d)
            log="$asan_dir/$target.log"
            # The first directory receives new inputs; the repository's
            # corpus is only read.
            if "$asan_dir/tests/fuzz/$target" -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=2048 \
                -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$root/$asan_dir/fuzz-artifacts/$target-" \
                "$work" "$root/tests/fuzz/corpus/$target" >"$log" 2>&1; then
                runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')
                note "$target: $runs inputs in ${fuzz_seconds} s, no crash, corpus $(ls "$work" | wc -l) new"
            else
                status=1
                tail -40 "$log"
                note "$target: CRASH (artifacts in $asan_dir/fuzz-artifacts)"
            fi
            rm -rf "$work"
        done
    fi
fi

if [[ " $steps " == *" tsan "* ]]; then
    tsan_dir=${TALLY_TSAN_DIR:-build-tsan}
    if [ ! -f "$tsan_dir/build.ninja" ]; then
        CC=$cc meson setup "$tsan_dir" -Dcuda=disabled -Dopencl=disabled -Dbuildtype=debugoptimized \
            -Db_sanitize=thread -Db_lundef=false >/dev/null
    fi
    meson compile -C "$tsan_dir" tests/check_threads >/dev/null
    t0=$SECONDS
    if TSAN_OPTIONS=halt_on_error=1:exitcode=66 TALLY_TEST_BACKEND=host CK_FORK=no \
        "$tsan_dir/tests/check_threads" >"$tsan_dir/tsan.log" 2>&1; then
        note "tsan: 8 threads x every op on host, no race, bits equal ($((SECONDS - t0)) s)"
    else
        status=1
        tail -40 "$tsan_dir/tsan.log"
        note "tsan: FAILED (log: $tsan_dir/tsan.log)"
    fi
fi
exit $status
