import Kafka
import Synchronization
import TestSupport
import Testing

@Suite("Kafka layer under hostile conditions", .timeLimit(.minutes(2)))
struct KafkaHardeningTests {
    @Test("each message carries the generation of the assignment it was fetched under, and generations increase")
    func assignmentGenerations() async throws {
        let cluster = try makeCluster(topic: "generations", partitionCount: 2)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: "generations", count: 20)
        let recorder = RebalanceRecorder()
        let first = try makeConsumer(cluster, topic: "generations", group: "generations", listener: recorder)
        let received = try await read(first) { $0.count >= 20 }
        await first.close()
        let announced = recorder.generations.value
        let firstGeneration = try #require(announced.first?.generation)
        #expect(firstGeneration > 0)
        #expect(received.allSatisfy { $0.assignmentGeneration == firstGeneration })

        // A second assignment of the same consumer (after a restart of the member) counts on.
        let second = try makeConsumer(cluster, topic: "generations", group: "generations-2", listener: recorder)
        let again = try await read(second) { $0.count >= 20 }
        await second.close()
        await producer.close()
        let later = try #require(recorder.generations.value.last?.generation)
        #expect(again.allSatisfy { $0.assignmentGeneration == later })
        #expect(later >= firstGeneration, "generations are per consumer, starting at 1")
    }

    @Test("a fatal producer error is reported once with librdkafka's underlying error, and later sends fail")
    func fatalProducerError() async throws {
        let cluster = try makeCluster(topic: "fatal", partitionCount: 1)
        let reported = Mutex<[KafkaError]>([])
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.linger = .milliseconds(2)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("fatal")) { error in
            reported.withLock { $0.append(error) }
        }.running()
        try await producer.send(topic: "fatal", key: nil, value: Array("before".utf8))
        #expect(producer.fatalError == nil)
        try producer.raiseFatalErrorForTesting(reason: "test: sequence desynchronised")
        let deadline = ContinuousClock.now + .seconds(30)
        while reported.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let errors = reported.withLock { $0 }
        #expect(errors.count == 1)
        #expect(errors.first?.isFatal == true)
        #expect(errors.first?.message.contains("sequence desynchronised") == true)
        #expect(producer.fatalError != nil)
        await #expect(throws: KafkaError.self) {
            try await producer.send(topic: "fatal", key: nil, value: Array("after".utf8))
        }
        await producer.close()
    }
}
