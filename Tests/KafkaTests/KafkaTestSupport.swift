import Foundation
import Kafka
import Logging
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

/// A logger that keeps test output readable: librdkafka's transient complaints are warnings.
func testLogger(_ label: String) -> Logger {
    var logger = Logger(label: "kafka-tests.\(label)")
    // KAFKA_TEST_LOG=debug (or info, ...) shows what the layer logs while a test runs.
    let level = ProcessInfo.processInfo.environment["KAFKA_TEST_LOG"].flatMap { Logger.Level(rawValue: $0) }
    logger.logLevel = level ?? .error
    return logger
}

/// A mock cluster with `topic` already created.
func makeCluster(topic: String, partitionCount: Int32, brokerCount: Int32 = 1) throws -> KafkaMockCluster {
    let cluster = try KafkaMockCluster(brokerCount: brokerCount, properties: ["log_level": "0"])
    try cluster.createTopic(topic, partitionCount: partitionCount)
    return cluster
}

/// A consumer of `topic` in `group`, with ``consumerConfiguration(_:group:)``.
func makeConsumer(
    _ cluster: KafkaMockCluster,
    topic: String,
    group: String,
    listener: (any KafkaRebalanceListener)? = nil
) throws -> KafkaConsumer {
    try KafkaConsumer(
        configuration: consumerConfiguration(cluster, group: group),
        topics: [topic],
        listener: listener,
        logger: testLogger(group)
    ).running()
}

func makeProducer(_ cluster: some TestKafkaBroker, label: String = "producer") throws -> KafkaProducer {
    var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
    configuration.linger = .milliseconds(2)
    return try KafkaProducer(configuration: configuration, logger: testLogger(label)).running()
}

/// Produces `count` messages `prefix-0`, `prefix-1`, ... (key = value), round robin over `partitionCount`
/// partitions, all in flight at once.
func produce(
    _ producer: KafkaProducer,
    topic: String,
    count: Int,
    prefix: String = "m",
    partitionCount: Int32? = nil
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<count {
            group.addTask {
                let bytes = Array("\(prefix)-\(index)".utf8)
                try await producer.send(
                    topic: topic, key: bytes, value: bytes,
                    partition: partitionCount.map { Int32(index) % $0 })
            }
        }
        try await group.waitForAll()
    }
}

/// Reads batches until `done` says the messages read so far are enough, at most `timeout`.
func read(
    _ consumer: KafkaConsumer,
    timeout: Duration = .seconds(30),
    onBatch: @escaping @Sendable ([KafkaMessage]) throws -> Void = { _ in },
    until done: @escaping @Sendable ([KafkaMessage]) -> Bool
) async throws -> [KafkaMessage] {
    try await withTimeout(timeout, "messages") {
        var received: [KafkaMessage] = []
        for try await batch in consumer.batches {
            try onBatch(batch)
            received += batch
            if done(received) {
                return received
            }
        }
        return received
    }
}

extension KafkaMessage {
    /// The value as text, for readable expectations.
    var text: String { self.value.map { String(decoding: $0, as: UTF8.self) } ?? "<null>" }
}

/// A value the test awaits conditions on, updated from other tasks or threads.
final class Observed<Value: Sendable>: Sendable {
    private let condition: AsyncCondition<Value>

    init(_ value: Value) {
        self.condition = AsyncCondition(value)
    }

    var value: Value {
        self.condition.read { $0 }
    }

    func update(_ body: (inout Value) -> Void) {
        self.condition.withLock(body)
    }

    /// Waits until `predicate` holds, at most `timeout`.
    @discardableResult
    func wait(
        _ what: String,
        timeout: Duration = .seconds(30),
        until predicate: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value {
        switch await self.condition.wait(deadline: .now + timeout, until: { predicate($0) ? $0 : nil }) {
        case .satisfied(let value): return value
        case .timedOut: throw TimedOut(what: what)
        case .cancelled: throw CancellationError()
        }
    }
}

/// Records a consumer's rebalances.
final class RebalanceRecorder: KafkaRebalanceListener {
    /// The partitions assigned now.
    let assigned = Observed<Set<KafkaPartition>>([])
    /// Every partition ever revoked.
    let revoked = Observed<[KafkaPartition]>([])
    /// Every generation announced, in order, with its partitions.
    let generations = Observed<[(generation: UInt64, partitions: [KafkaPartition])]>([])

    func partitionsAssigned(_ partitions: [KafkaPartition], generation: UInt64) async {
        self.assigned.update { $0.formUnion(partitions) }
        self.generations.update { $0.append((generation, partitions)) }
    }

    func partitionsRevoked(_ partitions: [KafkaPartition]) async {
        self.assigned.update { $0.subtract(partitions) }
        self.revoked.update { $0 += partitions }
    }
}

/// Reads `consumer` in a task of its own into an ``Observed`` list (several consumers may share one) until
/// the consumer closes; with
/// `storeOffsets`, stores each batch's offsets after recording it (the message is "finished").
@discardableResult
func startReading(
    _ consumer: KafkaConsumer,
    storeOffsets: Bool,
    into received: Observed<[KafkaMessage]> = Observed([])
) -> Observed<[KafkaMessage]> {
    Task {
        for try await batch in consumer.batches {
            // Stored before it is recorded, so that a test that saw a message may rely on its offset.
            if storeOffsets {
                var next: [KafkaPartition: Int64] = [:]
                for message in batch {
                    next[message.kafkaPartition] = message.offset + 1
                }
                try? consumer.storeOffsets(next)
            }
            received.update { $0 += batch }
        }
    }
    return received
}
