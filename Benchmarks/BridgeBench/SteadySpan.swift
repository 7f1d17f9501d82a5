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

    init(eventCount: Int, maxInFlight: Int) throws {
        self.start = max(eventCount / 10, maxInFlight)
        self.end = eventCount - max(eventCount / 10, 2 * maxInFlight)
        guard self.end - self.start >= eventCount / 5 else {
            throw BenchError(
                "\(eventCount) events are too few to measure with \(maxInFlight) in flight: the span between the first "
                    + "window and the last two would hold \(max(0, self.end - self.start)) outcomes; use --events "
                    + "\(5 * maxInFlight) or more, or --max-in-flight \(eventCount / 5) or less")
        }
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
