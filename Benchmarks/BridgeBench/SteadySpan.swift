import BenchSupport
import Foundation

/// The part of the backlog over which its CPU and rate are measured: the middle, where the bridge takes in events as
/// fast as it finishes notifications. Its ends are placed by when the bridge *completed* notifications (their
/// outcome's `completed_at`), not by when the bench read the outcomes.
///
/// Two earlier measures were wrong:
/// - From the first outcome read to the last: the first outcomes are read only once the bridge's producer has
///   connected, and by then the bridge has consumed, mapped, sent and answered up to `max_in_flight` notifications.
///   That measure left their work out while counting them (at 200 000 events and 40 000 in flight, a fifth of them).
/// - Between two counts of outcomes read: the bench's reader falls behind and catches up. Outcomes the bridge
///   finished before the span were then counted in it. Same build, same total CPU, and yet 6.2 against 9.7 µs per
///   notification.
///
/// So the bench reads the bridge's CPU every ``interval`` (a ``Trace``). Once every outcome is read, it takes the
/// readings nearest to the span's two ends, and counts the notifications completed between them.
struct SteadySpan: Sendable {
    /// The completed notification (in completion order) at which the span starts: a tenth of the backlog, and at
    /// least one window in.
    let start: Int
    /// The one at which it ends: a tenth of the backlog, and at least two windows, before its end (events are still
    /// being consumed then).
    let end: Int
    /// Whether the backlog is long enough for such a span. When it is not (fewer than five windows of events, as in
    /// the counting scripts' short runs), the span runs from the first completion to the last, and the report says
    /// so.
    let isSteady: Bool

    /// How often the bench reads the bridge's CPU.
    static let interval = Duration.milliseconds(20)

    init(eventCount: Int, maxInFlight: Int) {
        let start = max(eventCount / 10, maxInFlight)
        let end = eventCount - max(eventCount / 10, 2 * maxInFlight)
        self.isSteady = end - start >= eventCount / 5
        (self.start, self.end) = self.isSteady ? (start, end) : (0, eventCount - 1)
    }

    /// What the report says of the span when it is not steady.
    func caveat(maxInFlight: Int) -> String {
        guard !self.isSteady else { return "" }
        return "  caveat:         too few events for a span in the middle (at least 5 × \(maxInFlight)): measured from "
            + "the first completion, which leaves out the work of up to \(maxInFlight) notifications\n"
    }

    /// The readings nearest inside the span, and how many notifications were completed between them; `nil` when no
    /// two readings fall inside it.
    func measure(trace: [Sample], completions: [Int64]) -> Measured? {
        let sorted = completions.sorted()
        guard sorted.count > self.end else { return nil }
        let (from, to) = (sorted[self.start], sorted[self.end])
        guard let first = trace.first(where: { $0.epochMilliseconds >= from }),
            let last = trace.last(where: { $0.epochMilliseconds <= to }),
            last.epochMilliseconds > first.epochMilliseconds
        else { return nil }
        let completed =
            Self.firstIndex(in: sorted, notBelow: last.epochMilliseconds)
            - Self.firstIndex(in: sorted, notBelow: first.epochMilliseconds)
        return Measured(start: first, end: last, completed: completed)
    }

    /// Where `value` would go in `sorted`: the count of elements below it.
    private static func firstIndex(in sorted: [Int64], notBelow value: Int64) -> Int {
        var (low, high) = (0, sorted.count)
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The bridge's CPU over the span and the notifications it completed in it.
    struct Measured {
        let start: Sample
        let end: Sample
        let completed: Int

        var seconds: Double { Double(self.end.epochMilliseconds - self.start.epochMilliseconds) / 1000 }
        var cpu: Double { self.end.cpu - self.start.cpu }
        var serverCPU: Double { self.end.serverCPU - self.start.serverCPU }
    }

    /// Reads the bridge's and the server's CPU every ``interval`` until cancelled; returns the readings.
    static func trace(bridgePID: pid_t, serverPID: pid_t) async -> [Sample] {
        var samples: [Sample] = []
        while !Task.isCancelled {
            samples.append(Sample(bridgePID: bridgePID, serverPID: serverPID))
            try? await Task.sleep(for: Self.interval)
        }
        return samples
    }

    /// One reading of the bridge's CPU, by thread, and of the server's.
    struct Sample: Sendable {
        /// When, on the clock of the outcomes' `completed_at`.
        let epochMilliseconds: Int64
        let cpu: Double
        let threads: [Int: ProcessCPU.ThreadUsage]
        let serverCPU: Double

        init(bridgePID: pid_t, serverPID: pid_t) {
            self.epochMilliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            self.cpu = ProcessCPU.seconds(pid: bridgePID)
            self.threads = ProcessCPU.threads(pid: bridgePID)
            self.serverCPU = ProcessCPU.seconds(pid: serverPID)
        }
    }
}
