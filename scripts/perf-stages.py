#!/usr/bin/env python3
"""Per-stage CPU breakdown of a `pushbridge run` profile (docs/benchmarks.md, "Where the time goes").

Reads `perf script` output of a call-graph profile (perf record --call-graph dwarf -p <bridge pid>), demangled
with `swift demangle --simplified`, on stdin. Each sample goes to the innermost stage its stack passes through
(a malloc inside the outcome record's encoding counts for the outcome record), so the stages add up to 100%.
With --us-per-notification X (the run's CPU per notification), prints microseconds per notification too.

    perf record -F 400 --call-graph dwarf,32768 -p PID -o bridge.data -- sleep 10
    perf script -i bridge.data | swift demangle --simplified | scripts/perf-stages.py --us-per-notification 41.5
    ... | scripts/perf-stages.py --leaves send   # plus the innermost functions of the "send (request)" samples
"""

import argparse
import re
import sys

# Innermost match wins; the order here only breaks ties within one frame.
STAGES = [
    ("outcome record", r"OutcomeRecord\.encoded|InvalidTokenRecord\.encoded|DeadLetter\.record"),
    ("produce", r"KafkaProducer\.(produce|sendNow|send)|rd_kafka_produceva|KafkaRecordSink\.publish"),
    ("offset tracking", r"Pipeline\.pieceFinished|markFinished|KafkaConsumer\.storeOffset|Pipeline\.begin"),
    ("metrics", r"BridgeMetrics|Prometheus|recordInterval|Gauge\.record|Counter\.increment|Timer\.record"),
    ("logging", r"Logger\.|LogHandler|JSONLogHandler"),
    ("in-flight limit", r"FlowController|FlowControl\."),
    ("local validation", r"NotificationValidation"),
    ("map", r"RouterMapper\.map|Router\.map"),
    ("delivery report", r"deliveryReportCallback|ProducerContext\.delivered|DeliveryBox|answerHandler|Pipeline\.releaseRoom"),
    ("response handling", r"nghttp2_session_mem_recv|HTTP2ClientHandler\.(channelRead|responseHeader|responseData|"
                          r"streamClosed|trimDeadlines)|NIOSSLHandler\.(channelRead|doFlushReadData|decode)|"
                          r"APNSClient\.attempt|closure #\d+ in APNSClient\.send|PendingRequest\.(finish|__deallocating)|"
                          r"APNSResponse|APNSClient\.bounded"),
    ("send (request)", r"APNSClient\.prepare|APNSClient\.send|HTTP2ClientConnection\.send|ClientShared\.enqueue|"
                       r"drainInbox|submitQueued|HTTP2ClientHandler\.(submit|flush)|nghttp2_session_mem_send|"
                       r"ConnectionPool\.(leaseNow|lease|release)|NIOSSLHandler\.(flush|write)"),
    ("pipeline (state machine, tasks)", r"Pipeline\.|DeliveryStateMachine"),
    ("consume", r"PollLoop|KafkaConsumer|KafkaMessage|SourceEvent|KafkaEventSource|BatchBuffer|BatchReader"),
    ("NIO event loop (other)", r"SelectableEventLoop|NIOPosix|NIOCore"),
]
COMPILED = [(name, re.compile(pattern)) for name, pattern in STAGES]
HEADER = re.compile(r"^(\S.*?)\s+\d+(/\d+)?\s+")


def classify(comm, frames):
    for frame in frames:  # innermost first
        for name, pattern in COMPILED:
            if pattern.search(frame):
                return name
    if comm.startswith("rdk:"):
        return "librdkafka threads (" + comm.split(":")[0] + ":*)"
    if comm.startswith("NIO-"):
        return "NIO event loop (other)"
    return "other (Swift runtime, dispatch, scheduler)"


def samples(lines):
    comm, frames = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
        elif not line[0].isspace():
            match = HEADER.match(line)
            comm = match.group(1) if match else line.split()[0]
            frames = []
        else:
            parts = line.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
    if comm is not None:
        yield comm, frames


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--us-per-notification", type=float, default=None)
    parser.add_argument("--leaves", metavar="STAGE", default=None,
                        help="also list the innermost functions of the samples of stages whose name contains STAGE")
    arguments = parser.parse_args()
    counts, leaves, total = {}, {}, 0
    for comm, frames in samples(sys.stdin):
        stage = classify(comm, frames)
        counts[stage] = counts.get(stage, 0) + 1
        total += 1
        if arguments.leaves is not None and arguments.leaves in stage and frames:
            leaf = re.sub(r"\s*\(.*?\)$", "", frames[0])[:110]
            leaves[leaf] = leaves.get(leaf, 0) + 1
    if total == 0:
        sys.exit("no samples on stdin")
    print(f"{total} samples")
    per = arguments.us_per_notification
    print("| stage | share | µs per notification |" if per else "| stage | share |")
    print("|---|---|---|" if per else "|---|---|")
    for stage, count in sorted(counts.items(), key=lambda item: -item[1]):
        share = count / total
        print(f"| {stage} | {share * 100:.1f}% | {share * per:.1f} |" if per else f"| {stage} | {share * 100:.1f}% |")
    if leaves:
        print(f"\ninnermost functions in stages matching {arguments.leaves!r} (share of all samples):")
        for leaf, count in sorted(leaves.items(), key=lambda item: -item[1])[:40]:
            print(f"  {count / total * 100:5.1f}%  {leaf}")


if __name__ == "__main__":
    main()
