import BenchSupport
import Foundation
import Synchronization

/// What the outcome topic held so far: counts by status, when the first and last outcome were read, and the
/// event-to-outcome latencies of the live phase's events and of the urgent events (``UrgentTrickle``), and
/// every outcome's `completed_at` (for ``SteadySpan`` and ``StreamRamp``).
final class OutcomeTally: Sendable {
    private struct State {
        var count = 0
        var deliveredCount = 0
        var otherStatusExamples: [String] = []
        var firstReadAt: ContinuousClock.Instant?
        var lastReadAt: ContinuousClock.Instant?
        var liveLatenciesMilliseconds: [Double] = []
        var liveCount = 0
        var completions: [Int64] = []
        /// The urgent events' latencies by their offset.
        var urgentLatenciesMilliseconds: [Int64: Double] = [:]
    }

    private let state = Mutex(State())
    /// Produce time (epoch ms) of each live event, by "partition/offset".
    private let liveProducedAt = Mutex([Int64: Int64]())
    /// Produce time (epoch ms) of each urgent event, by offset in the urgent partition.
    private let urgentProducedAt = Mutex([Int64: Int64]())
    /// The urgent events' partition, when there are any.
    let urgentPartition: Int32?

    init(urgentPartition: Int32?) {
        self.urgentPartition = urgentPartition
    }

    func recordUrgentEvent(offset: Int64, producedAtEpochMilliseconds: Int64) {
        self.urgentProducedAt.withLock { $0[offset] = producedAtEpochMilliseconds }
    }

    static func liveKey(partition: Int32, offset: Int64) -> Int64 {
        Int64(partition) << 40 | offset
    }

    func recordLiveEvent(partition: Int32, offset: Int64, producedAtEpochMilliseconds: Int64) {
        self.liveProducedAt.withLock {
            $0[Self.liveKey(partition: partition, offset: offset)] = producedAtEpochMilliseconds
        }
    }

    /// Counts one outcome record (its JSON value).
    func add(_ values: [[UInt8]]) {
        let now = ContinuousClock.now
        var live: [(key: Int64, completedAt: Int64)] = []
        var delivered = 0
        var others: [String] = []
        var completions: [Int64] = []
        var urgent: [(offset: Int64, completedAt: Int64)] = []
        for value in values {
            let fields = OutcomeFields(value)
            if let completedAt = fields.completedAtEpochMilliseconds {
                completions.append(completedAt)
            }
            if fields.status == "delivered" {
                delivered += 1
            } else if others.count < 5 {
                others.append(String(decoding: value, as: UTF8.self))
            }
            if fields.offset >= 0, let completedAt = fields.completedAtEpochMilliseconds {
                if fields.partition == self.urgentPartition {
                    urgent.append((fields.offset, completedAt))
                } else {
                    live.append((Self.liveKey(partition: fields.partition, offset: fields.offset), completedAt))
                }
            }
        }
        let urgentLatencies: [(Int64, Double)] = self.urgentProducedAt.withLock { producedAt in
            urgent.compactMap { entry in producedAt[entry.offset].map { (entry.offset, Double(entry.completedAt - $0)) }
            }
        }
        let latencies: [Double] = self.liveProducedAt.withLock { producedAt in
            live.compactMap { entry in producedAt[entry.key].map { Double(entry.completedAt - $0) } }
        }
        self.state.withLock { state in
            state.count += values.count
            state.deliveredCount += delivered
            if state.otherStatusExamples.count < 5 { state.otherStatusExamples += others }
            if state.firstReadAt == nil { state.firstReadAt = now }
            state.lastReadAt = now
            state.liveLatenciesMilliseconds += latencies
            state.liveCount += latencies.count
            state.completions += completions
            for (offset, latency) in urgentLatencies { state.urgentLatenciesMilliseconds[offset] = latency }
        }
    }

    var count: Int { self.state.withLock { $0.count } }
    var deliveredCount: Int { self.state.withLock { $0.deliveredCount } }
    var otherStatusExamples: [String] { self.state.withLock { $0.otherStatusExamples } }
    var firstReadAt: ContinuousClock.Instant? { self.state.withLock { $0.firstReadAt } }
    var lastReadAt: ContinuousClock.Instant? { self.state.withLock { $0.lastReadAt } }
    var liveCount: Int { self.state.withLock { $0.liveCount } }
    var liveLatenciesMilliseconds: [Double] { self.state.withLock { $0.liveLatenciesMilliseconds } }
    var completions: [Int64] { self.state.withLock { $0.completions } }
    var urgentLatenciesMilliseconds: [Int64: Double] { self.state.withLock { $0.urgentLatenciesMilliseconds } }
}
