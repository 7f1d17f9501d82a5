import Kafka
import Testing
import Waiting

/// The producer's poll thread belongs to its `run()`: nothing starts in `init`.
@Suite("The producer's run")
struct KafkaProducerRunTests {
    /// Counts the delivery reports it is told of; a test waits on the count.
    final class Reports: KafkaDeliveryHandler, @unchecked Sendable {
        let count = AsyncCondition(0)

        override func delivered(_ delivery: KafkaDelivery) {
            self.count.withLock { $0 += 1 }
        }

        func wait(for expected: Int) async -> Bool {
            await self.count.wait(deadline: .now + .seconds(30)) { $0 >= expected ? () : nil }.value != nil
        }
    }

    static func producer(_ cluster: KafkaMockCluster) throws -> KafkaProducer {
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.linger = .milliseconds(2)
        return try KafkaProducer(configuration: configuration, logger: testLogger("run"))
    }

    @Test("a producer reports nothing before run(); once it runs the report comes, and close ends the run")
    func reportsComeOnceItRuns() async throws {
        let cluster = try makeCluster(topic: "run", partitionCount: 1)
        let producer = try Self.producer(cluster)
        let reports = Reports()
        #expect(producer.sendNow(topic: "run", key: nil, value: [1], handler: reports))
        // librdkafka tells a report only from a poll: without the thread, none, however long it waits.
        try await Task.sleep(for: .milliseconds(500))
        #expect(reports.count.read { $0 } == 0)
        let running = Task { await producer.run() }
        #expect(await reports.wait(for: 1))
        await producer.close()
        await running.value
        cluster.close()
    }

    @Test("a producer closed without running reports what it had, from the close's flush")
    func closeWithoutRun() async throws {
        let cluster = try makeCluster(topic: "unrun", partitionCount: 1)
        let producer = try Self.producer(cluster)
        let reports = Reports()
        for value in 0..<3 {
            #expect(producer.sendNow(topic: "unrun", key: nil, value: [UInt8(value)], handler: reports))
        }
        await producer.close()
        #expect(reports.count.read { $0 } == 3)
        // A run after the close starts nothing and returns at once.
        await producer.run()
        cluster.close()
    }

    @Test("a producer released without close or run frees itself")
    func releasedWithoutRun() async throws {
        let cluster = try makeCluster(topic: "released", partitionCount: 1)
        do {
            let producer = try Self.producer(cluster)
            _ = producer.inFlightMessageCount
        }
        let producer = try Self.producer(cluster).running()
        try await producer.send(topic: "released", key: nil, value: [1])
        await producer.close()
        cluster.close()
    }
}
