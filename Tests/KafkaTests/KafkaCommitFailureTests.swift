import Kafka
import Logging
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

// Periodic commits are librdkafka's own (they wait for a stable group, docs/kafka.md "Commits during a rebalance"),
// so their failures reach the layer only through librdkafka's offset_commit_cb: the one line an operator sees.

@Suite("Commit failures")
struct KafkaCommitFailureTests {
    @Test(
        "each background commit the coordinator refuses is logged as a warning, Committing offsets failed, with its error"
    )
    func refusedBackgroundCommitIsLogged() async throws {
        let topic = "refused-commits"
        let partition = KafkaPartition(topic: topic, partition: 0)
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 5, partitionCount: 1)
        await producer.close()

        let lines = RecordedLines()
        var logger = Logger(label: "commit-failures") { _ in LineRecorder(lines: lines) }
        logger.logLevel = .warning
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "refused-commits"), topics: [topic], logger: logger
        ).running()
        _ = try await read(consumer) { $0.count >= 5 }
        try cluster.injectErrors([.topicAuthorizationFailed, .topicAuthorizationFailed], on: .offsetCommit)
        // Stored, not committed: librdkafka's timer (200 ms here) sends it, and the mock refuses it.
        try consumer.storeOffset(5, for: partition)
        try await lines.wait(timeout: .seconds(30)) { $0.message == "Committing offsets failed" }
        await consumer.close()
        let failures = lines.all.filter { $0.message == "Committing offsets failed" }
        #expect(failures.allSatisfy { $0.error.contains("TOPIC_AUTHORIZATION_FAILED") }, "\(failures)")
    }

    @Test(
        "a partition assigned again after its assignment was lost (a commit answered ILLEGAL_GENERATION) starts where the consumer had finished, not at the committed offset"
    )
    func lostAssignmentResumesAtFinishedOffset() async throws {
        let topic = "lost-assignment"
        let partition = KafkaPartition(topic: topic, partition: 0)
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 10, prefix: "before", partitionCount: 1)

        let lines = RecordedLines()
        var logger = Logger(label: "lost-assignment") { _ in LineRecorder(lines: lines) }
        logger.logLevel = .info
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "lost-assignment"), topics: [topic], logger: logger
        ).running()
        let first = try await read(consumer) { $0.count >= 10 }
        #expect(first.map(\.offset) == Array(0..<10))
        // Nothing was committed yet. The next commit, of offset 10, is refused as a stale generation: librdkafka 2.0.2
        // then counts the assignment lost, rejoins, and the only member gets the partition back.
        try cluster.injectErrors([.illegalGeneration], on: .offsetCommit)
        try consumer.storeOffset(10, for: partition)
        try await lines.wait(timeout: .seconds(30)) {
            $0.message == "Partitions revoked" && $0.metadata["kafka.lost"] == "true"
        }
        try await produce(producer, topic: topic, count: 5, prefix: "after", partitionCount: 1)
        await producer.close()
        let second = try await read(consumer, timeout: .seconds(60)) { $0.contains { $0.offset == 14 } }
        await consumer.close()
        // Without the resume, the partition started at the committed offset (none: the earliest) and 0..<10 came again.
        #expect(second.map(\.offset) == Array(10..<15), "\(second.map(\.offset))")
        #expect(lines.all.contains { $0.message.hasPrefix("Partitions assigned again after a lost assignment") })
    }
}

/// The lines a ``LineRecorder`` kept: each message, the error passed with it, and its metadata as text.
private final class RecordedLines: Sendable {
    typealias Line = (message: String, error: String, metadata: [String: String])
    private let lines = AsyncCondition<[Line]>([])
    var all: [Line] { self.lines.read { $0 } }
    func append(_ line: Line) { self.lines.withLock { $0.append(line) } }

    /// Waits until a line satisfies `matches`, woken by each new line; throws ``TimedOut`` after `timeout`.
    func wait(timeout: Duration, for matches: @escaping @Sendable (Line) -> Bool) async throws {
        try await waitUntil("a log line", self.lines, timeout: timeout) { $0.contains(where: matches) }
    }
}

/// A log handler that keeps every line in ``RecordedLines``.
private struct LineRecorder: LogHandler {
    let lines: RecordedLines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let metadata = (event.metadata ?? [:]).mapValues { "\($0)" }
        self.lines.append((event.message.description, event.error.map { "\($0)" } ?? "", metadata))
    }
}
