import Kafka
import Logging
import Synchronization
import TestSupport
import TestWaiting
import Testing

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
            configuration: consumerConfiguration(cluster, group: "refused-commits"), topics: [topic], logger: logger)
        _ = try await read(consumer) { $0.count >= 5 }
        try cluster.injectErrors([.topicAuthorizationFailed, .topicAuthorizationFailed], on: .offsetCommit)
        // Stored, not committed: librdkafka's timer (200 ms here) sends it, and the mock refuses it.
        try consumer.storeOffset(5, for: partition)
        try await waitUntil(timeout: .seconds(30)) {
            lines.all.contains { $0.message == "Committing offsets failed" }
        }
        await consumer.close()
        let failures = lines.all.filter { $0.message == "Committing offsets failed" }
        #expect(failures.allSatisfy { $0.error.contains("TOPIC_AUTHORIZATION_FAILED") }, "\(failures)")
    }
}

/// The lines a ``LineRecorder`` kept: each message and the error passed with it.
private final class RecordedLines: Sendable {
    private let lines = Mutex<[(message: String, error: String)]>([])
    var all: [(message: String, error: String)] { self.lines.withLock { $0 } }
    func append(_ message: String, error: String) { self.lines.withLock { $0.append((message, error)) } }
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
        self.lines.append(event.message.description, error: event.error.map { "\($0)" } ?? "")
    }
}
