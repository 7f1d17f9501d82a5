#!/bin/sh
# Finds the objects a `pushbridge run` retains and releases again and again: the long-lived ones (configuration,
# templates, clients, metrics, shared strings) whose reference count every notification changes, often from several
# threads, so that the count's cache line moves between cores on each call. Prints, for every object that takes at
# least half a call per notification during `BridgeBench --events N --live-events 0`, its calls per notification,
# the threads that made them and the call sites that made the most (docs/benchmarks.md, "Objects every notification
# retains").
#
# Like scripts/count-calls.sh: root only (uprobes with the object's address as argument), perf (Debian's linux-perf)
# and a release build of pushbridge and BridgeBench; the bridge runs about 100x slower under the probes, so keep N
# small (2000 takes about a minute). Values that are no object (null, tagged pointers, bridged strings) cost no
# atomic operation and are left out, and so are objects the runtime never counts (immortal: the empty array).
#
#   scripts/count-shared.sh [pushbridge binary] [events]
set -eu
# shellcheck source=scripts/lib/uprobes.sh
. "$(dirname "$0")/lib/uprobes.sh"
uprobe_begin count-shared count_shared 2000 "$@"

perf probe -q -x "$swift_core" --add 'count_shared:retain=swift_retain object=%di:u64'
perf probe -q -x "$swift_core" --add 'count_shared:release=swift_release object=%di:u64'

uprobe_wrapper shared.data -g -e count_shared:retain -e count_shared:release
uprobe_bench count-shared "$work/wrap.sh" "$events"
perf script -i "$work/shared.data" -F comm,tid,event,trace,ip,sym 2>/dev/null | python3 "$(dirname "$0")/count-shared.py" "$events"
