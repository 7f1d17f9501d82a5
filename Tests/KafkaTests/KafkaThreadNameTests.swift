import Foundation
import Kafka
import TestSupport
import Testing

/// The client's own threads carry their names, so `top -H`, `perf` and `/proc/<pid>/task/*/comm` tell the
/// producer's delivery reports from the consumer's poll loop (docs/benchmarks.md reads CPU per thread this way).
@Suite("Kafka thread names")
struct KafkaThreadNameTests {
    /// The names of this process's threads.
    static func threadNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { task in
            try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test("the producer's poll thread and the consumer's poll thread are named")
    func pollThreadsAreNamed() async throws {
        let topic = "names"
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "names"), topics: [topic], logger: testLogger("c")
        ).running()
        // A thread names itself once it runs, a moment after it is started (at least 30 s allowed).
        var names = try Self.threadNames()
        for _ in 0..<1500 where !(names.contains("kafka-prod-poll") && names.contains("kafka-cons-poll")) {
            try await Task.sleep(for: .milliseconds(20))
            names = try Self.threadNames()
        }
        #expect(names.contains("kafka-prod-poll"), "threads: \(names)")
        #expect(names.contains("kafka-cons-poll"), "threads: \(names)")
        await consumer.close()
        await producer.close()
        cluster.close()
    }
}
