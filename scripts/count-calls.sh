#!/bin/sh
# Counts the calls to swift_retain, swift_release and swift_allocObject (the heap objects Swift makes: class
# instances, closure contexts, array and string storage) a `pushbridge run` makes per notification, by thread,
# during `BridgeBench --events N --live-events 0` (docs/benchmarks.md, "Counting reference operations").
#
# Unlike CPU time, the counts do not depend on the host's speed or load: two builds can be compared in one run each,
# where a CPU difference under ~3% is lost in the noise of alternating runs. Root only (uprobes); needs `perf`
# (Debian's linux-perf) and a release build of pushbridge and BridgeBench. Each probe hit costs microseconds, so
# the bridge runs about 50x slower than usual: keep N small (5000 takes under a minute).
#
#   scripts/count-calls.sh [pushbridge binary] [events]
set -eu
# shellcheck source=scripts/lib/uprobes.sh
. "$(dirname "$0")/lib/uprobes.sh"
uprobe_begin count-calls count_calls 5000 "$@"

perf probe -q -x "$swift_core" --add count_calls:retain=swift_retain
perf probe -q -x "$swift_core" --add count_calls:release=swift_release
perf probe -q -x "$swift_core" --add count_calls:alloc=swift_allocObject

# No stacks: only the counts.
uprobe_wrapper calls.data -e count_calls:retain -e count_calls:release -e count_calls:alloc
uprobe_bench count-calls "$work/wrap.sh" "$events"
grep -E "events:" "$work/bench.txt"
echo "calls per notification ($binary, $events events):"
perf script -i "$work/calls.data" -F comm,event 2>/dev/null | awk -v n="$events" '
    { sub(/:$/, "", $NF); sub(/^count_calls:/, "", $NF); total[$NF]++; $NF = $NF; event = $NF; $NF = ""
      thread[$0 "|" event]++ }
    END {
        for (e in total) printf "  %-8s %7.1f\n", e, total[e] / n
        for (k in thread) if (thread[k] / n >= 1) { split(k, p, "|"); printf "    %-18s %-8s %7.1f\n", p[1], p[2], thread[k] / n }
    }' | sort
