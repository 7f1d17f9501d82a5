import Foundation
import Kafka
import Logging
import Synchronization

/// What a test reads back from topics, taken batch by batch as it arrives.
package protocol ReadBackRecords: Sendable {
    /// Nothing read yet.
    init()
    /// Takes the next batch.
    mutating func add(_ batch: [KafkaMessage])
}

/// Records read back, by topic, in the order they arrived.
package struct RecordsByTopic: ReadBackRecords {
    /// The records of each topic.
    package private(set) var byTopic: [String: [KafkaMessage]] = [:]
    /// How many records arrived, over all topics.
    package private(set) var count = 0

    package init() {}

    package mutating func add(_ batch: [KafkaMessage]) {
        for message in batch { self.byTopic[message.topic, default: []].append(message) }
        self.count += batch.count
    }

    /// The records of `topic`; `nil` when none arrived.
    package subscript(topic: String) -> [KafkaMessage]? { self.byTopic[topic] }
}

/// Reads `topics` of `broker` from the start, without joining a group, until `done` holds for what arrived (at most
/// `timeout`); returns the records and whether `done` held. It reads partition 0 of each topic: the result topics
/// the tests read back have one partition.
package func readBack<Records: ReadBackRecords>(
    _ topics: [String], from broker: some TestKafkaBroker, as type: Records.Type = Records.self,
    timeout: Duration, until done: @escaping @Sendable (Records) -> Bool
) async throws -> (records: Records, complete: Bool) {
    let consumer = try KafkaConsumer(
        configuration: consumerConfiguration(broker, group: "reader-\(UUID())"),
        readingFromStart: topics.map { KafkaPartition(topic: $0, partition: 0) }, logger: quietLogger()
    ).running()
    let collected = Mutex(Records())
    let reader = Task {
        for try await batch in consumer.batches {
            let enough = collected.withLock { records in
                records.add(batch)
                return done(records)
            }
            if enough { return true }
        }
        return false
    }
    let watchdog = Task {
        try await Task.sleep(for: timeout)
        await consumer.close()
    }
    let finished: Bool
    do {
        finished = try await reader.value
    } catch {
        watchdog.cancel()
        await consumer.close()
        throw error
    }
    watchdog.cancel()
    await consumer.close()
    return (collected.withLock { $0 }, finished)
}

/// The committed offsets of `group` for `topic`'s partitions `0..<partitions` (asked without joining the group).
package func committedOffsets(
    _ broker: some TestKafkaBroker, group: String, topic: String, partitions: Int32
) async throws -> [Int32: Int64] {
    let consumer = try KafkaConsumer(
        configuration: consumerConfiguration(broker, group: group), readingFromStart: [], logger: quietLogger()
    ).running()
    let offsets: [KafkaPartition: Int64]
    do {
        offsets = try await consumer.committedOffsets(
            for: (0..<partitions).map { KafkaPartition(topic: topic, partition: $0) }, timeout: .seconds(10)
        )
    } catch {
        await consumer.close()
        throw error
    }
    await consumer.close()
    var result: [Int32: Int64] = [:]
    for (partition, offset) in offsets { result[partition.partition] = offset }
    return result
}

/// A logger for the clients tests make: critical messages only, unless `BRIDGE_TEST_LOG` names a level.
package func quietLogger() -> Logger {
    var logger = Logger(label: "bridge-tests")
    logger.logLevel =
        ProcessInfo.processInfo.environment["BRIDGE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    return logger
}
