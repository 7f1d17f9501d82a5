# Shared by scripts/count-calls.sh and scripts/count-shared.sh: the checks before placing uprobes on the Swift
# runtime of a pushbridge binary, and the run of BridgeBench with the bridge under a perf wrapper.
#
#   uprobe_begin NAME GROUP DEFAULT_EVENTS [BINARY] [EVENTS]
#                                 a script's start: sets binary (default .build/release/pushbridge) and events, then
#                                 runs uprobe_checks and uprobe_start
#   uprobe_checks NAME BINARY     sets swift_core (the libswiftCore.so BINARY links), or exits 2 saying what is missing
#   uprobe_start GROUP            sets work (a scratch directory) and removes the probes of GROUP and work at exit
#   uprobe_wrapper DATA PERF_ARGS...
#                                 writes $work/wrap.sh, which starts the bridge under `perf record -q -c 1 PERF_ARGS`
#                                 into $work/DATA (one sample per probe hit)
#   uprobe_bench NAME WRAPPER N   runs BridgeBench over N events with the bridge started by WRAPPER; exits 1 unless
#                                 every event became an outcome

uprobe_begin() {
    binary=$(realpath "${4:-.build/release/pushbridge}")
    events=${5:-$3}
    uprobe_checks "$1" "$binary"
    uprobe_start "$2"
}

uprobe_checks() {
    [ "$(id -u)" = 0 ] || { echo "$1: root is needed to place uprobes" >&2; exit 2; }
    command -v perf >/dev/null || { echo "$1: perf is missing (apt-get install linux-perf)" >&2; exit 2; }
    [ -x .build/release/BridgeBench ] || { echo "$1: .build/release/BridgeBench is missing (swift build -c release)" >&2; exit 2; }
    swift_core=$(ldd "$2" | awk '/libswiftCore/ {print $3}')
    [ -n "$swift_core" ] || { echo "$1: $2 does not link libswiftCore.so dynamically" >&2; exit 2; }
}

uprobe_start() {
    work=$(mktemp -d)
    # shellcheck disable=SC2064 # the group is expanded now, the directory at exit
    trap "perf probe -q -d '$1:*' 2>/dev/null || true; rm -rf \"\$work\"" EXIT
    perf probe -q -d "$1:*" 2>/dev/null || true
}

uprobe_wrapper() {
    data=$1
    shift
    # BridgeBench starts the bridge through this wrapper; perf's arguments are fixed now, the bridge's at run time.
    cat >"$work/wrap.sh" <<WRAPPER
#!/bin/sh
exec perf record -q -o "$work/$data" -c 1 $* -- "$binary" "\$@"
WRAPPER
    chmod +x "$work/wrap.sh"
}

uprobe_bench() {
    # The bench reports the run as incomplete, since perf, not the bridge, answers its SIGTERM; what counts is that
    # every event became an outcome.
    .build/release/BridgeBench --events "$3" --live-events 0 --pushbridge "$2" >"$work/bench.txt" 2>&1 || true
    grep -q "events: *$3 pre-loaded + 0 live -> $3 outcomes" "$work/bench.txt" || {
        cat "$work/bench.txt" >&2
        echo "$1: the run did not turn every event into an outcome" >&2
        exit 1
    }
}
