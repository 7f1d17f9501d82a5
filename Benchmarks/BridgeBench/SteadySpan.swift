import BenchSupport
import Foundation

/// The outcomes of the backlog over which its CPU and rate are measured: the middle, where the bridge takes in events
/// as fast as their outcomes come out.
///
/// Not from the first outcome read to the last: the first outcomes are read only once the bridge's producer has
/// connected, and by then it has consumed, mapped, sent and answered up to `max_in_flight` notifications whose work
/// that measure leaves out while counting them (at 200 000 events and 40 000 in flight, a fifth of them). At the end,
/// the last window drains with no new events behind it.
struct SteadySpan: Sendable {
    /// The outcome count at which the span starts: a tenth of the backlog, and at least one window in.
    let start: Int
    /// The outcome count at which it ends: a tenth of the backlog, and at least two windows, before its end (the events
    /// not yet read then are those in flight and as many again still to be consumed).
    let end: Int
    /// Whether the backlog is long enough for such a span. When it is not (fewer than five windows of events, as in
    /// the counting scripts' short runs), the span is the whole backlog from the first outcome read, and the report
    /// says so.
    let isSteady: Bool

    init(eventCount: Int, maxInFlight: Int) {
        let start = max(eventCount / 10, maxInFlight)
        let end = eventCount - max(eventCount / 10, 2 * maxInFlight)
        self.isSteady = end - start >= eventCount / 5
        (self.start, self.end) = self.isSteady ? (start, end) : (1, eventCount)
    }

    /// What the report says of the span when it is not steady.
    func caveat(maxInFlight: Int) -> String {
        guard !self.isSteady else { return "" }
        return "  caveat:         too few events for a span in the middle (at least 5 × \(maxInFlight)): measured from "
            + "the first outcome read, which leaves out the work of up to \(maxInFlight) notifications\n"
    }

    /// Reads the bridge's CPU when the outcome count reaches the span's start and its end, every 2 ms; `nil` when
    /// cancelled first.
    func sample(
        tally: OutcomeTally, bridgePID: pid_t, serverPID: pid_t
    ) async -> (start: Sample, end: Sample)? {
        var start: Sample?
        while !Task.isCancelled {
            let count = tally.count
            if start == nil, count >= self.start {
                start = Sample(count: count, bridgePID: bridgePID, serverPID: serverPID)
            }
            if let start, count >= self.end {
                return (start, Sample(count: count, bridgePID: bridgePID, serverPID: serverPID))
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    /// What the bench reads when the outcome count crosses one end of the span.
    struct Sample: Sendable {
        let count: Int
        let at: ContinuousClock.Instant
        let cpu: Double
        let threads: [Int: ProcessCPU.ThreadUsage]
        let serverCPU: Double

        init(count: Int, bridgePID: pid_t, serverPID: pid_t) {
            self.count = count
            self.at = ContinuousClock.now
            self.cpu = ProcessCPU.seconds(pid: bridgePID)
            self.threads = ProcessCPU.threads(pid: bridgePID)
            self.serverCPU = ProcessCPU.seconds(pid: serverPID)
        }
    }
}
