import BenchSupport
import Foundation
import Kafka
import Synchronization

/// The topics of a soak run.
enum SoakTopics {
    static let input = "soak.events"
    static let outcomes = "soak.outcomes"
    static let invalidTokens = "soak.invalid-tokens"
    static let deadLetters = "soak.dead-letters"
    /// Outcome partitions: the mock cluster keeps about 5 MiB per partition, and a run with many duplicates writes
    /// ~50 000 outcomes of ~700 bytes; the reader keeps up anyway.
    static let outcomePartitionCount: Int32 = 24
}

/// One outcome record as the soak needs it. Times are seconds since the epoch (the bridge's wall clock).
struct SoakOutcome: Sendable {
    /// The event's index (its key is `customer-<index>`, ``EventFactory``).
    var eventIndex: Int
    var partition: Int32
    var offset: Int64
    var notificationID: String
    var status: String
    var attempts: Int
    var sentAt: Double
    var completedAt: Double
}

/// What the soak's reader saw on the input and result topics (read from the start without joining a group).
final class SoakRecords: Sendable {
    struct State {
        var outcomes: [SoakOutcome] = []
        /// Dead letters by event index.
        var deadLetters: [Int: Int] = [:]
        var invalidTokens = 0
        /// Result records whose event the soak could not tell (no `customer-N` key).
        var unreadable = 0
        /// Input records seen, and the end offset (last offset + 1) of each input partition.
        var inputCount = 0
        var inputEnds: [Int32: Int64] = [:]
    }

    let state = Mutex(State())

    /// Takes a batch of the reader.
    func add(_ batch: [KafkaMessage]) {
        var outcomes: [SoakOutcome] = []
        var deadLetters: [Int] = []
        var invalid = 0
        var unreadable = 0
        var inputEnds: [Int32: Int64] = [:]
        var inputCount = 0
        for message in batch {
            switch message.topic {
            case SoakTopics.input:
                inputCount += 1
                inputEnds[message.partition] = max(inputEnds[message.partition] ?? 0, message.offset + 1)
            case SoakTopics.outcomes:
                guard let value = message.value, let outcome = Self.outcome(value) else {
                    unreadable += 1
                    continue
                }
                outcomes.append(outcome)
            case SoakTopics.deadLetters:
                if let index = message.key.flatMap({ Self.eventIndex(String(decoding: $0, as: UTF8.self)) }) {
                    deadLetters.append(index)
                } else {
                    unreadable += 1
                }
            default:
                invalid += 1
            }
        }
        self.state.withLock { state in
            state.outcomes += outcomes
            for index in deadLetters { state.deadLetters[index, default: 0] += 1 }
            state.invalidTokens += invalid
            state.unreadable += unreadable
            state.inputCount += inputCount
            state.inputEnds.merge(inputEnds) { Swift.max($0, $1) }
        }
    }

    static func outcome(_ value: [UInt8]) -> SoakOutcome? {
        let fields = OutcomeFields(value)
        guard let key = OutcomeFields.string("key", in: value), let index = Self.eventIndex(key),
            let notificationID = OutcomeFields.string("notification_id", in: value),
            let completed = fields.completedAtEpochMilliseconds
        else { return nil }
        // `sent_at` is null for a notification never sent (e.g. expired while it waited).
        let sent =
            OutcomeFields.string("sent_at", in: value).flatMap {
                OutcomeFields.epochMilliseconds(iso8601: Array($0.utf8)[...])
            } ?? completed
        return SoakOutcome(
            eventIndex: index, partition: fields.partition, offset: fields.offset, notificationID: notificationID,
            status: fields.status, attempts: Int(OutcomeFields.integer("attempts", in: value) ?? 1),
            sentAt: Double(sent) / 1000, completedAt: Double(completed) / 1000)
    }

    /// `customer-<index>` (``EventFactory``) as the index.
    static func eventIndex(_ key: String) -> Int? {
        guard key.hasPrefix("customer-") else { return nil }
        return Int(key.dropFirst("customer-".count))
    }
}
