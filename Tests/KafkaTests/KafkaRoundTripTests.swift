import Kafka
import Synchronization
import TestSupport
import TestWaiting
import Testing

@Suite("Producing and consuming", .timeLimit(.minutes(1)))
struct KafkaRoundTripTests {
    @Test("keys, headers and binary values arrive exactly as produced")
    func roundTripKeepsKeysHeadersAndBinaryValues() async throws {
        let cluster = try makeCluster(topic: "round-trip", partitionCount: 1)
        let producer = try makeProducer(cluster)
        let everyByte = (0...255).map { UInt8($0) }
        let sent: [(key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader])] = [
            (Array("k1".utf8), everyByte, [KafkaHeader(name: "trace", value: [0, 1, 2])]),
            (nil, Array("no key".utf8), []),
            (
                [0xFF, 0x00],
                [],
                [
                    KafkaHeader(name: "dup", value: Array("a".utf8)),
                    KafkaHeader(name: "dup", value: Array("b".utf8)),
                    KafkaHeader(name: "null", value: nil),
                ]
            ),
            (Array("tombstone".utf8), nil, []),
        ]
        var deliveries: [KafkaDelivery] = []
        for message in sent {
            deliveries.append(
                try await producer.send(
                    topic: "round-trip", key: message.key, value: message.value, headers: message.headers)
            )
        }
        #expect(deliveries.map(\.offset) == [0, 1, 2, 3])
        #expect(deliveries.allSatisfy { $0.partition == KafkaPartition(topic: "round-trip", partition: 0) })

        let consumer = try makeConsumer(cluster, topic: "round-trip", group: "round-trip")
        let received = try await read(consumer) { $0.count >= sent.count }
        await consumer.close()
        await producer.close()

        #expect(received.map(\.offset) == [0, 1, 2, 3])
        for (message, expected) in zip(received, sent) {
            #expect(message.topic == "round-trip")
            #expect(message.partition == 0)
            #expect(message.key == expected.key)
            #expect(message.value == expected.value)
            #expect(message.headers == expected.headers)
            #expect(message.timestampMilliseconds != nil)
        }
    }

    @Test("many sends in flight at once are all delivered")
    func manySendsInFlightAreAllDelivered() async throws {
        let cluster = try makeCluster(topic: "in-flight", partitionCount: 3)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: "in-flight", count: 3000)
        try await producer.flush(timeout: .seconds(5))
        await producer.close()

        let consumer = try makeConsumer(cluster, topic: "in-flight", group: "in-flight")
        let received = try await read(consumer) { $0.count >= 3000 }
        let lag = try consumer.lag(for: (0..<3).map { KafkaPartition(topic: "in-flight", partition: $0) })
        await consumer.close()
        #expect(Set(received.map(\.text)) == Set((0..<3000).map { "m-\($0)" }))
        #expect(lag.map(\.highWatermark).reduce(0, +) == 3000)
        #expect(lag.allSatisfy { $0.lagMessageCount == 0 })
    }

    @Test("sends with a completion: each is reported once, also past a full local queue; a refused one at once")
    func completionSendsAreEachReportedOnce() async throws {
        let cluster = try makeCluster(topic: "completion", partitionCount: 2)
        // A local queue of 100 messages, so that 2000 sends have to wait for room.
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.maxQueuedMessageCount = 100
        configuration.linger = .milliseconds(2)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("completion")).running()
        let reports = ReportTally()
        for index in 0..<2000 {
            await producer.send(
                topic: "completion", key: nil, value: Array("m-\(index)".utf8),
                handler: DeliveryBox { reports.add(index, $0) })
        }
        try await producer.flush(timeout: .seconds(10))
        #expect(reports.count == 2000)
        #expect(reports.failures.isEmpty)
        #expect(reports.duplicates == 0)

        // Larger than message.max.bytes: librdkafka refuses it before queueing, and the completion says so.
        await producer.send(
            topic: "completion", key: nil, value: [UInt8](repeating: 7, count: 2_000_000),
            handler: DeliveryBox { reports.add(-1, $0) })
        #expect(reports.failures.map(\.code) == [.messageSizeTooLarge])
        await producer.close()

        let consumer = try makeConsumer(cluster, topic: "completion", group: "completion")
        let received = try await read(consumer) { $0.count >= 2000 }
        await consumer.close()
        #expect(Set(received.map(\.text)) == Set((0..<2000).map { "m-\($0)" }))
    }

    @Test("concurrent senders waiting for room in a full local queue all go on, each message reported once")
    func concurrentSendersPastAFullQueue() async throws {
        let cluster = try makeCluster(topic: "full-queue", partitionCount: 1)
        // A local queue of 16 messages and 8 senders of 150 each, none waiting for its reports: most sends find
        // the queue full and wait in turn for a report.
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.maxQueuedMessageCount = 16
        configuration.linger = .milliseconds(1)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("full-queue")).running()
        let reports = ReportTally()
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<8 {
                group.addTask {
                    for index in 0..<150 {
                        let number = sender * 150 + index
                        await producer.send(
                            topic: "full-queue", key: nil, value: Array("m-\(number)".utf8),
                            handler: DeliveryBox { reports.add(number, $0) })
                    }
                }
            }
        }
        try await producer.flush(timeout: .seconds(10))
        await producer.close()
        #expect(reports.count == 1200)
        #expect(reports.duplicates == 0)
        #expect(reports.failures.isEmpty)
        #expect(reports.offsets.values.sorted() == (0..<1200).map(Int64.init))
    }

    /// No broker answers, so no report ever comes: the waiting senders must sleep, not wake each other with their
    /// refusals (issue 28: both cores spun for as long as the brokers were away), and cancelling them ends their
    /// sends at once with `_INTR`, instead of a loop that tries the full queue again and again.
    @Test(
        "senders waiting for room in a queue no broker drains wait without trying again; cancelled, they fail at once")
    func sendersWaitingForRoomSleepAndCancel() async throws {
        // Nothing listens on port 1 of loopback: every message stays in librdkafka's local queue.
        var configuration = KafkaProducerConfiguration(bootstrapServers: "127.0.0.1:1")
        configuration.maxQueuedMessageCount = 4
        configuration.properties["log_level"] = "0"
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("no-room")).running()
        let reports = ReportTally()
        for index in 0..<4 {
            #expect(producer.sendNow(topic: "no-room", key: nil, value: [UInt8(index)]) { reports.add(index, $0) })
        }
        #expect(!producer.sendNow(topic: "no-room", key: nil, value: [4]) { reports.add(4, $0) })
        let refusedBefore = producer.queueFullRefusalCount
        let senders = Task {
            await withTaskGroup(of: Void.self) { group in
                for sender in 10..<13 {
                    group.addTask {
                        await producer.send(
                            topic: "no-room", key: nil, value: [UInt8(sender)],
                            handler: DeliveryBox { reports.add(sender, $0) })
                    }
                }
            }
        }
        // Three senders each find the queue full once, then wait for a report that does not come.
        try await waitUntil(timeout: .seconds(30)) { producer.queueFullRefusalCount >= refusedBefore + 3 }
        try await Task.sleep(for: .milliseconds(500))
        #expect(producer.queueFullRefusalCount == refusedBefore + 3, "waiting senders tried the full queue again")
        senders.cancel()
        _ = try await withTimeout(.seconds(30), "the cancelled senders") { await senders.value }
        #expect(reports.count == 3, "only the three cancelled sends are answered before the close")
        #expect(reports.failures.count == 3 && reports.failures.allSatisfy { $0.code == .interrupted })
        await producer.close(timeout: .milliseconds(100))
        #expect(reports.count == 7, "the four queued messages are failed by the close")
    }

    @Test("sends to a handler object: each handler gets its own report once, with an offset; a refused one at once")
    func handlerSendsAreEachReportedOnce() async throws {
        let cluster = try makeCluster(topic: "handler", partitionCount: 1)
        let producer = try makeProducer(cluster)
        let reports = ReportTally()
        for index in 0..<200 {
            let taken = producer.sendNow(
                topic: "handler", key: nil, value: Array("h-\(index)".utf8),
                handler: TallyHandler(index: index, tally: reports))
            #expect(taken)
        }
        try await producer.flush(timeout: .seconds(10))
        #expect(reports.count == 200)
        #expect(reports.failures.isEmpty)
        #expect(reports.duplicates == 0)
        // One partition: the offsets are 0..<200, each reported to the handler of its own message.
        #expect(reports.offsets == Dictionary(uniqueKeysWithValues: (0..<200).map { ($0, Int64($0)) }))

        let refused = producer.sendNow(
            topic: "handler", key: nil, value: [UInt8](repeating: 7, count: 2_000_000),
            handler: TallyHandler(index: -1, tally: reports))
        #expect(refused)  // taken care of: reported at once, not "try again later"
        #expect(reports.failures.map(\.code) == [.messageSizeTooLarge])
        await producer.close()
    }

    @Test("a reader that falls behind stops the polling: only the bounded buffer's batches are taken")
    func slowReaderBoundsWhatIsTaken() async throws {
        let topic = "bounded"
        let partition = KafkaPartition(topic: topic, partition: 0)
        let cluster = try makeCluster(topic: topic, partitionCount: 1)
        let producer = try makeProducer(cluster)
        try await produce(producer, topic: topic, count: 500, partitionCount: 1)
        await producer.close()

        var configuration = consumerConfiguration(cluster, group: "bounded")
        configuration.maxBatchMessageCount = 10
        configuration.bufferedBatchCount = 2
        let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger("c"))
            .running()
        let first = try await read(consumer) { !$0.isEmpty }
        // One batch is with the reader and two wait in the buffer; the poll thread must take no more.
        try await withTimeout(.seconds(30), "the buffer to fill") {
            while try consumer.lag(for: [partition]).first?.position != 30 {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let position = try consumer.lag(for: [partition]).first?.position
        await consumer.close()
        #expect(first.count == 10)
        #expect(position == 30)
    }
}

/// Delivery reports by send index, from any thread.
private final class ReportTally: Sendable {
    private let state = Mutex(
        (seen: Set<Int>(), duplicates: 0, failures: [KafkaError](), offsets: [Int: Int64]()))

    func add(_ index: Int, _ result: Result<KafkaDelivery, KafkaError>) {
        self.state.withLock { state in
            if !state.seen.insert(index).inserted { state.duplicates += 1 }
            switch result {
            case .success(let delivery): state.offsets[index] = delivery.offset
            case .failure(let error): state.failures.append(error)
            }
        }
    }

    var offsets: [Int: Int64] { self.state.withLock { $0.offsets } }

    var count: Int { self.state.withLock { $0.seen.count } }
    var duplicates: Int { self.state.withLock { $0.duplicates } }
    var failures: [KafkaError] { self.state.withLock { $0.failures } }
}

/// A delivery handler that reports to a tally under its send index.
private final class TallyHandler: KafkaDeliveryHandler, @unchecked Sendable {
    let index: Int
    let tally: ReportTally

    init(index: Int, tally: ReportTally) {
        self.index = index
        self.tally = tally
    }

    override func delivered(_ delivery: KafkaDelivery) {
        self.tally.add(self.index, .success(delivery))
    }

    override func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {
        self.tally.add(self.index, .failure(error))
    }
}
