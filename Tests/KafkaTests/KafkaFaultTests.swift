import Kafka
import TestSupport
import TestWaiting
import Testing
import Waiting

@Suite("Faults: injected errors, broker outages, closing", .timeLimit(.minutes(1)))
struct KafkaFaultTests {
    @Test("retryable produce errors are retried by the idempotent producer: every message lands once, in order")
    func retryableProduceErrorsAreRetried() async throws {
        let topic = "retry"
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await producer.send(topic: topic, key: nil, value: Array("warm-up".utf8))
        try cluster.injectErrors([.notEnoughReplicas, .notLeaderForPartition, .notEnoughReplicas], on: .produce)
        try await produce(producer, topic: topic, count: 50, partitionCount: 1)
        await producer.close()

        let consumer = try makeConsumer(cluster, topic: topic, group: "retry")
        let received = try await read(consumer) { $0.count >= 51 }
        await consumer.close()
        #expect(received.count == 51)
        #expect(Set(received.dropFirst().map(\.text)) == Set((0..<50).map { "m-\($0)" }))
    }

    @Test("a permanent produce error surfaces as a typed error: what was acknowledged is exactly what is written")
    func permanentProduceErrorSurfaces() async throws {
        let topic = "permanent"
        let partition = KafkaPartition(topic: topic, partition: 0)
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await producer.send(topic: topic, key: nil, value: Array("before".utf8))
        try cluster.injectErrors([.topicAuthorizationFailed], on: .produce)
        // librdkafka may also refuse later sends at once while it believes the topic unauthorized: those
        // surface as errors too. What matters is that no acknowledged message is missing and no failed one
        // is written.
        var acknowledged = ["before"]
        var failures: [KafkaError] = []
        for index in 0..<5 {
            do {
                try await producer.send(topic: topic, key: nil, value: Array("m-\(index)".utf8))
                acknowledged.append("m-\(index)")
            } catch let error as KafkaError {
                failures.append(error)
            }
        }
        await producer.close()
        #expect(failures.first?.code == .topicAuthorizationFailed)
        #expect(failures.allSatisfy { $0.code == .topicAuthorizationFailed })

        let consumer = try makeConsumer(cluster, topic: topic, group: "permanent")
        let (_, high) = try await consumer.queryWatermarks(for: partition, timeout: .seconds(5))
        let received = try await read(consumer) { $0.count >= high }
        await consumer.close()
        #expect(received.map(\.text) == acknowledged)
    }

    /// Keeps what ``KafkaDeliveryHandler/failed(_:message:)`` hands back.
    final class Undelivered: KafkaDeliveryHandler, @unchecked Sendable {
        let reports = AsyncCondition<[(error: KafkaError, message: KafkaUndeliveredMessage)]>([])

        override func delivered(_ delivery: KafkaDelivery) {
            Issue.record("delivered at \(delivery.partition) although the broker refuses the topic")
        }

        override func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {
            self.reports.withLock { $0.append((error, message)) }
        }
    }

    @Test(
        "a failed delivery hands the message back as it was produced (key, value, headers, a null one too): a sender keeps no copy while it waits"
    )
    func failedDeliveryHandsTheMessageBack() async throws {
        let topic = "handed-back"
        let cluster = try makeCluster(topic: topic, partitionCount: 2)
        let producer = try makeProducer(cluster)
        try await producer.send(topic: topic, key: nil, value: Array("warm-up".utf8))
        // Refused at once (no such partition): handed back on the sending thread, without key or value too.
        let refused = Undelivered()
        #expect(producer.sendNow(topic: topic, key: nil, value: nil, partition: 7, handler: refused))
        let refusal = refused.reports.read { $0.first }
        #expect(refusal?.error.code == .unknownPartition)
        #expect(refusal?.message == KafkaUndeliveredMessage(topic: topic, key: nil, value: nil, headers: []))

        // Failed by the broker: handed back from the delivery report, as librdkafka still holds it.
        try cluster.injectErrors([.topicAuthorizationFailed], on: .produce)
        let headers = [
            KafkaHeader(name: "pushbridge-app", value: Array("shop".utf8)), KafkaHeader(name: "empty", value: nil),
            KafkaHeader(name: "bytes", value: [0, 0xFF, 0x0A]),
        ]
        let sent = KafkaUndeliveredMessage(
            topic: topic, key: Array("device-1".utf8), value: Array("{\"status\":\"delivered\"}".utf8), headers: headers
        )
        let reported = Undelivered()
        #expect(
            producer.sendNow(
                topic: sent.topic, key: sent.key, value: sent.value, headers: sent.headers, handler: reported))
        let failure = await reported.reports.wait(deadline: .now + .seconds(30)) { $0.first }.value
        #expect(failure?.error.code == .topicAuthorizationFailed)
        #expect(failure?.message == sent)
        await producer.close()
        cluster.close()
    }

    @Test("a broker that goes down and comes back mid-stream loses no message")
    func brokerDownThenUpLosesNothing() async throws {
        let topic = "outage"
        let cluster = try makeCluster(topic: topic, partitionCount: 2)
        let producer = try makeProducer(cluster)
        let consumer = try makeConsumer(cluster, topic: topic, group: "outage")
        let received = startReading(consumer, storeOffsets: true)
        try await produce(producer, topic: topic, count: 100, prefix: "before")
        try await received.wait("messages before the outage") { $0.count >= 100 }

        try cluster.setBrokerDown(1)
        let sending = Task { try await produce(producer, topic: topic, count: 100, prefix: "during") }
        // The outage lasts a moment: sends queue up and connections fail meanwhile.
        try await Task.sleep(for: .seconds(1))
        try cluster.setBrokerUp(1)
        try await withTimeout(.seconds(30), "sends after the outage") { try await sending.value }
        let texts = try await received.wait("messages after the outage") { messages in
            Set(messages.map(\.text)).count >= 200
        }.map(\.text)
        await consumer.close()
        await producer.close()
        let expected = Set((0..<100).map { "before-\($0)" } + (0..<100).map { "during-\($0)" })
        #expect(Set(texts) == expected)
    }

    @Test("closing a consumer with assigned partitions and unread batches returns promptly")
    func consumerCloseIsPrompt() async throws {
        let topic = "close"
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 500, partitionCount: 1)
        await producer.close()

        var configuration = consumerConfiguration(cluster, group: "close")
        configuration.maxBatchMessageCount = 10
        configuration.bufferedBatchCount = 1
        // Far from a prompt close, so that the bound below tells the two apart with room on both sides.
        configuration.closeTimeout = .seconds(20)
        let recorder = RebalanceRecorder()
        let consumer = try KafkaConsumer(
            configuration: configuration, topics: [topic], listener: recorder, logger: testLogger("c")
        ).running()
        let first = try await read(consumer) { !$0.isEmpty }
        #expect(first.count == 10)
        // The poll thread is now blocked on the full buffer, with the partition assigned.
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            try await withTimeout(.seconds(30), "close") { await consumer.close() }
        }
        // Tells a prompt close (0.1 s unloaded) from one that waits out the 20 s close timeout: halfway.
        #expect(elapsed < .seconds(10))
        #expect(recorder.revoked.value == [KafkaPartition(topic: topic, partition: 0)])
        var batches = consumer.batches.makeAsyncIterator()
        #expect(try await batches.next() == nil)
    }

    @Test("a rebalance listener that never returns holds up neither the group nor close beyond its timeout")
    func stuckListener() async throws {
        let topic = "stuck-listener"
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 20, partitionCount: 1)
        await producer.close()
        var configuration = consumerConfiguration(cluster, group: "stuck-listener")
        configuration.rebalanceListenerTimeout = .seconds(1)
        // Far from the listener timeout, so that the bound below tells the two apart with room on both sides.
        configuration.closeTimeout = .seconds(20)
        let consumer = try KafkaConsumer(
            configuration: configuration, topics: [topic], listener: StuckOnAssignment(), logger: testLogger("c")
        ).running()
        // The assignment goes on once the listener's timeout passed.
        let received = try await read(consumer) { $0.count >= 20 }
        #expect(received.count == 20)
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            try await withTimeout(.seconds(30), "close") { await consumer.close() }
        }
        // Closing, then at most the 1 s listener timeout for the call that is still stuck (1.1 s unloaded), not the
        // 20 s close timeout nor the stuck call itself: halfway.
        #expect(elapsed < .seconds(10))
    }

    @Test("closing a consumer whose coordinator is down returns within the close timeout")
    func consumerCloseWithBrokerDownIsPrompt() async throws {
        let topic = "close-down"
        let partition = KafkaPartition(topic: topic, partition: 0)
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 20, partitionCount: 1)
        await producer.close()
        var configuration = consumerConfiguration(cluster, group: "close-down")
        configuration.closeTimeout = .seconds(1)
        let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger("c"))
            .running()
        let received = try await read(consumer) { $0.count >= 20 }
        try consumer.storeOffset(received.last!.offset + 1, for: partition)
        try cluster.setBrokerDown(1)
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            try await withTimeout(.seconds(30), "close") { await consumer.close() }
        }
        // The 1 s close timeout, not the 10 s default: a deadline never fires early, so the default's side is 10 s
        // or more, and the 6 s between are room for a loaded host (this test runs alone, after the parallel suite).
        #expect(elapsed < .seconds(7))
        var batches = consumer.batches.makeAsyncIterator()
        #expect(try await batches.next() == nil)
    }

    @Test("closing a producer with undeliverable sends in flight fails them promptly instead of hanging")
    func producerCloseFailsInFlightSends() async throws {
        let topic = "stuck"
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await producer.send(topic: topic, key: nil, value: Array("warm-up".utf8))
        try cluster.setBrokerDown(1)
        let outcomes = Observed<[Result<KafkaDelivery, KafkaError>]>([])
        for index in 0..<10 {
            Task {
                do {
                    let delivery = try await producer.send(topic: topic, key: nil, value: Array("\(index)".utf8))
                    outcomes.update { $0.append(.success(delivery)) }
                } catch let error as KafkaError {
                    outcomes.update { $0.append(.failure(error)) }
                }
            }
        }
        try await withTimeout(.seconds(30), "sends in flight") {
            while producer.inFlightMessageCount < 10 {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            try await withTimeout(.seconds(30), "close") { await producer.close(timeout: .milliseconds(300)) }
        }
        let results = try await outcomes.wait("every send to return") { $0.count == 10 }
        // The 300 ms close timeout (0.35 s unloaded), not close's 10 s default nor the purge's 5 s wait for reports
        // that do not come: deadlines never fire early, and this test runs alone, after the parallel suite.
        #expect(elapsed < .seconds(5))
        for result in results {
            guard case .failure(let error) = result else {
                Issue.record("a send to a down broker succeeded")
                continue
            }
            #expect([.purgedQueued, .purgedInFlight].contains(error.code))
        }
    }
}

/// A listener whose assignment call does not return (for ten minutes).
private struct StuckOnAssignment: KafkaRebalanceListener {
    func partitionsAssigned(_ partitions: [KafkaPartition], generation: UInt64) async {
        try? await Task.sleep(for: .seconds(600))
    }

    func partitionsRevoked(_ partitions: [KafkaPartition]) async {}
}
