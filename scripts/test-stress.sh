#!/usr/bin/env bash
# The whole test suite RUNS times in a row while another process keeps one core busy (issue 34): a test that
# depends on the host's speed fails here before it fails on a slower CI host. Called by `make test-stress`,
# after the build; not part of `make test`.
#
#   scripts/test-stress.sh RUNS LOG_DIR
#
# Each run is `make -k test-suite` (the parallel suite, the tests that run alone, the fuzz smoke run: each step
# even when an earlier one failed), its output in LOG_DIR/run-N.log. At the end it lists every test that failed in at least one run, with the runs it
# failed in, and exits 1 when any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:?number of runs}
logs=${2:?log directory}
mkdir -p "$logs"
rm -f "$logs"/run-*.log

# The busy core: stress-ng when it is installed, otherwise a shell loop (the same load: one CPU-bound process).
if command -v stress-ng >/dev/null; then
    stress-ng --cpu 1 --quiet &
else
    sh -c 'while :; do :; done' &
fi
busy=$!
trap 'kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null' EXIT
echo "test-stress: $runs runs of the whole suite, one core kept busy by process $busy; logs in $logs"

failed_runs=0
statuses=()
for run in $(seq 1 "$runs"); do
    started=$(date +%s)
    if make -k --no-print-directory test-suite >"$logs/run-$run.log" 2>&1; then
        status=passed
    else
        status=failed
        failed_runs=$((failed_runs + 1))
    fi
    statuses[run]=$status
    summary=$(grep -E '^. Test run with [0-9]+ tests? ' "$logs/run-$run.log" | tr '\n' ';')
    echo "test-stress: run $run $status in $(($(date +%s) - started)) s ${summary}"
done

# Every test that failed, by name (Swift Testing marks a failed test's lines with ✘; a test without a display name
# is named by its function), and the runs it failed in.
echo "test-stress: tests that failed at least once:"
# A suite's own failure (its setup, e.g. a broker that did not start) is listed as "Suite NAME".
grep -HoE '^✘ (Test ("([^"]|\\")*"|[A-Za-z_][A-Za-z0-9_]*\([^)]*\))|Suite "([^"]|\\")*" recorded)' "$logs"/run-*.log \
    | sed -E -e 's| recorded$||' -e 's|^.*/run-([0-9]+)\.log:✘ (Test )?(.*)$|\3\t\1|' \
    | sort -u \
    | awk -F'\t' '{ runs[$1] = runs[$1] (runs[$1] == "" ? "" : ",") $2 } END { for (t in runs) print "  " t "  (runs " runs[t] ")" }' \
    | sort
# A run can fail without a failed test: a crash, the fuzz smoke run, the build of a fuzz target.
for run in $(seq 1 "$runs"); do
    if [ "${statuses[run]}" = failed ] && ! grep -qE '^✘ Test ("|[A-Za-z_][A-Za-z0-9_]*\()' "$logs/run-$run.log"; then
        echo "  run $run failed outside a test; its last lines:"
        tail -n 15 "$logs/run-$run.log" | sed 's/^/    /'
    fi
done
if [ "$failed_runs" -eq 0 ]; then
    echo "  none"
fi
echo "test-stress: $((runs - failed_runs)) of $runs runs passed with one core busy"
[ "$failed_runs" -eq 0 ]
