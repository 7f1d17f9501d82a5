import Kafka
import TestSupport
import Testing

/// The consumer's poll thread and its listener belong to its `run()`: nothing starts in `init`.
@Suite("The consumer's run")
struct KafkaConsumerRunTests {
    @Test("run() serves the listener in its own task: the assignment is heard, and close ends the run")
    func runServesTheListener() async throws {
        let cluster = try makeCluster(topic: "consumer-run", partitionCount: 2)
        let recorder = RebalanceRecorder()
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "consumer-run"), topics: ["consumer-run"],
            listener: recorder, logger: testLogger("consumer-run"))
        let running = Task { await consumer.run() }
        try await recorder.assigned.wait("the assignment") { $0.count == 2 }
        await consumer.close()
        await running.value
        // The close's revocation reached the listener through the run's task.
        #expect(Set(recorder.revoked.value).count == 2)
        cluster.close()
    }

    @Test("a consumer closed without running closes at once, and its batches end")
    func closeWithoutRun() async throws {
        let cluster = try makeCluster(topic: "consumer-unrun", partitionCount: 1)
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "consumer-unrun"), topics: ["consumer-unrun"],
            listener: RebalanceRecorder(), logger: testLogger("consumer-unrun"))
        await consumer.close()
        var batches = consumer.batches.makeAsyncIterator()
        #expect(try await batches.next() == nil)
        // A run after the close starts nothing and returns at once.
        await consumer.run()
        cluster.close()
    }

    @Test("a consumer released without run or close frees itself")
    func releasedWithoutRun() async throws {
        let cluster = try makeCluster(topic: "consumer-released", partitionCount: 1)
        do {
            let consumer = try KafkaConsumer(
                configuration: consumerConfiguration(cluster, group: "consumer-released"),
                topics: ["consumer-released"], logger: testLogger("consumer-released"))
            _ = try consumer.assignment()
        }
        let consumer = try makeConsumer(cluster, topic: "consumer-released", group: "consumer-released-2")
        await consumer.close()
        cluster.close()
    }
}
