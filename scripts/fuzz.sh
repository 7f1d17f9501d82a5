#!/usr/bin/env bash
# Runs the fuzz targets (docs/fuzzing.md). Called by mk/fuzz.mk; the targets are already built.
#
#   scripts/fuzz.sh libfuzzer BIN_DIR OUT_DIR SECONDS [libFuzzer options...]
#       each target under libFuzzer for SECONDS, from the committed corpus Fuzz/corpus/<target>; new inputs go
#       to OUT_DIR/<target>/corpus and crashes to OUT_DIR/<target>/ (never into Fuzz/corpus).
#   scripts/fuzz.sh smoke BIN_DIR OUT_DIR MUTATIONS
#       each target's stand-alone driver (the normal debug build) over the committed corpus plus MUTATIONS
#       seeded mutations; a crash writes its input to OUT_DIR/crash-<target>.
#
# FUZZ_TARGETS (space-separated) picks targets; all six by default. Exit status 1 when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:?mode: libfuzzer or smoke}
bin=${2:?binary directory}
out=${3:?output directory}
amount=${4:?seconds or mutations}
shift 4
targets=${FUZZ_TARGETS:-FuzzEventParser FuzzTemplate FuzzConfiguration FuzzSimulatorRequest FuzzBinaryProtocol FuzzDeliveryStateMachine}

# The Swift runtime's crash handler reads the crashed process's memory from a helper thread, which AddressSanitizer
# reports as a use-after-free of its own and which hides the real crash: libFuzzer reports crashes instead.
export SWIFT_BACKTRACE=enable=no
# LeakSanitizer reports Swift globals (the fixed routes, the scenario) as leaks: their boxes are reachable only
# through pointers it does not scan. Memory growth is caught by -rss_limit_mb and -malloc_limit_mb instead.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

mkdir -p "$out"
failed=()
for target in $targets; do
    start=$(date +%s)
    case $mode in
    libfuzzer)
        mkdir -p "$out/$target/corpus"
        log="$out/$target/fuzz.log"
        before=$(find "$out/$target" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'timeout-*' \
            -o -maxdepth 1 -name 'oom-*' -o -maxdepth 1 -name 'slow-unit-*' | wc -l)
        echo "fuzz: $target for ${amount}s (log: $log)"
        # Fork mode with crashes ignored: one known bug does not end the run, so a run reports every distinct
        # failure it meets (each written to $out/$target/crash-*, timeout-* or oom-*).
        "$bin/$target" "$out/$target/corpus" "Fuzz/corpus/$target" \
            -dict="Fuzz/dict/$target.dict" -max_total_time="$amount" -timeout=10 -rss_limit_mb=2048 \
            -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
            -artifact_prefix="$out/$target/" "$@" >"$log" 2>&1
        status=$?
        after=$(find "$out/$target" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'timeout-*' \
            -o -maxdepth 1 -name 'oom-*' -o -maxdepth 1 -name 'slow-unit-*' | wc -l)
        grep -E '^#[0-9]+: cov' "$log" | tail -1 | sed 's/^/  /'
        if [ "$after" -gt "$before" ]; then
            echo "  $((after - before)) new failing inputs in $out/$target:"
            grep -hoE 'Precondition failed.*|Fatal error.*|ERROR: libFuzzer: [a-z-]+|ERROR: AddressSanitizer: [a-z-]+' \
                "$log" "$out/$target"/fuzz-*.log 2>/dev/null | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /'
            status=1
        fi
        ;;
    smoke)
        "$bin/$target" --mutations "$amount" --seed 1 --dict "Fuzz/dict/$target.dict" --crash-dir "$out" \
            "Fuzz/corpus/$target"
        status=$?
        ;;
    *)
        echo "fuzz.sh: unknown mode $mode" >&2
        exit 2
        ;;
    esac
    if [ $status -ne 0 ]; then
        echo "fuzz: $target FAILED (exit $status) after $(( $(date +%s) - start ))s" >&2
        failed+=("$target")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]}; inputs in $out (docs/fuzzing.md: reproducing a finding)" >&2
    exit 1
fi
