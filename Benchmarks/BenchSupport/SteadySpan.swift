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
/// So the bench reads the bridge's CPU every ``interval`` (``trace(bridgePID:serverPID:)``). Once every outcome is
/// read, it takes the readings nearest to the span's two ends, and counts the notifications completed between them.
package struct SteadySpan: Sendable {
    /// The completed notification (in completion order) at which the span starts: a tenth of the backlog, and at
    /// least one window in.
    package let start: Int
    /// The one at which it ends: a tenth of the backlog, and at least two windows, before its end (events are still
    /// being consumed then).
    package let end: Int
    /// Whether the backlog is long enough for such a span. When it is not (fewer than five windows of events, as in
    /// the counting scripts' short runs), the span runs from the first completion to the last, and the report says
    /// so.
    package let isSteady: Bool
    /// The bridge's `max_in_flight`, which places the span.
    private let maxInFlight: Int

    /// How often the bench reads the bridge's CPU.
    package static let interval = Duration.milliseconds(20)

    package init(eventCount: Int, maxInFlight: Int) {
        let start = max(eventCount / 10, maxInFlight)
        let end = eventCount - max(eventCount / 10, 2 * maxInFlight)
        self.maxInFlight = maxInFlight
        self.isSteady = end - start >= eventCount / 5
        (self.start, self.end) = self.isSteady ? (start, end) : (0, eventCount - 1)
    }

    /// What the report says of the span when it is not steady.
    package var caveat: String {
        guard !self.isSteady else { return "" }
        return "  caveat:         too few events for a span in the middle (at least 5 × \(self.maxInFlight)): "
            + "measured from the first completion, which leaves out the work of up to \(self.maxInFlight) "
            + "notifications\n"
    }

    /// The readings nearest inside the span, and how many notifications were completed between them; `nil` when no
    /// two readings fall inside it.
    package func measure(trace: [Sample], completions: [Int64]) -> Measured? {
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
    package struct Measured: Sendable {
        package let start: Sample
        package let end: Sample
        package let completed: Int

        package var seconds: Double { Double(self.end.epochMilliseconds - self.start.epochMilliseconds) / 1000 }
        package var cpu: Double { self.end.cpu - self.start.cpu }
        package var serverCPU: Double { self.end.serverCPU - self.start.serverCPU }
    }

    /// Reads the bridge's and the server's CPU every ``interval`` until cancelled; returns the readings.
    package static func trace(bridgePID: pid_t, serverPID: pid_t) async -> [Sample] {
        var samples: [Sample] = []
        while !Task.isCancelled {
            samples.append(Sample(bridgePID: bridgePID, serverPID: serverPID))
            try? await Task.sleep(for: Self.interval)
        }
        return samples
    }

    /// One reading of the bridge's CPU, by thread, and of the server's.
    package struct Sample: Sendable {
        /// When, on the clock of the outcomes' `completed_at`.
        package let epochMilliseconds: Int64
        package let cpu: Double
        package let threads: [Int: ProcessCPU.ThreadUsage]
        package let serverCPU: Double

        /// Reads both processes now.
        package init(bridgePID: pid_t, serverPID: pid_t) {
            self.init(
                epochMilliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded()),
                cpu: ProcessCPU.seconds(pid: bridgePID), threads: ProcessCPU.threads(pid: bridgePID),
                serverCPU: ProcessCPU.seconds(pid: serverPID))
        }

        /// A reading as given (for tests).
        package init(
            epochMilliseconds: Int64, cpu: Double, threads: [Int: ProcessCPU.ThreadUsage] = [:], serverCPU: Double
        ) {
            self.epochMilliseconds = epochMilliseconds
            self.cpu = cpu
            self.threads = threads
            self.serverCPU = serverCPU
        }
    }
}
