import APNSCore
import Foundation
import Kafka
import Logging
import PipelineTestSupport
import ServiceLifecycle
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

@testable import Bridge
@testable import BridgeCore

// The pipeline on librdkafka's mock cluster (a real Kafka wire-protocol cluster on loopback): consumer group,
// offset store and commit, idempotent producer.

@Suite("Pipeline on Kafka")
struct KafkaPipelineTests {
    @Test("every event is accounted for and committed offsets equal the end offsets after graceful shutdown")
    func accountingThroughKafka() async throws {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        defer { cluster.close() }
        try cluster.createTopic("orders", partitionCount: 3)
        for topic in TestWorld.resultTopicNames {
            try cluster.createTopic(topic, partitionCount: 1)
        }
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster), logger: quietLogger()).running()
        // Per ten events: one not JSON (dead letter), one without tokens (unmatched), eight with two tokens,
        // one of which (in the "x2" events) APNs says is unregistered.
        for index in 0..<90 {
            let value: String
            switch index % 10 {
            case 0: value = "not json \(index)"
            case 1: value = #"{"other":\#(index)}"#
            case 2: value = #"{"tokens":["aa\#(index)","dead\#(index)"]}"#
            default: value = #"{"tokens":["aa\#(index)","bb\#(index)"]}"#
            }
            // The dead-lettered events carry a null header and an empty one: a dead letter keeps both as they are.
            let headers =
                index % 10 == 0
                ? [KafkaHeader(name: "trace", value: nil), KafkaHeader(name: "tenant", value: [])] : []
            try await producer.send(
                topic: "orders", key: Array("k\(index)".utf8), value: Array(value.utf8), headers: headers,
                partition: Int32(index % 3)
            )
        }

        let source = KafkaEventSource(
            configuration: consumerConfiguration(cluster, group: "pushbridge"), topics: ["orders"],
            logger: quietLogger()
        )
        let sink = CountingSink(base: KafkaRecordSink(producer: producer))
        let pipeline = Pipeline(
            source: source, mapper: TokensMapper(expiration: nil),
            sender: ScriptedSender { token in
                token.hasPrefix("dead")
                    ? .answered(APNSResponse(status: 410, reason: .unregistered, invalidSinceEpochMilliseconds: 1))
                    : .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
            },
            sink: sink, configuration: PipelineConfiguration(maxInFlight: 50), metrics: BridgeMetrics(),
            logger: quietLogger()
        )
        let group = ServiceGroup(configuration: .init(services: [.init(service: pipeline)], logger: quietLogger()))
        let run = Task { try await group.run() }
        // 144 outcomes + 9 invalid tokens + 9 dead letters.
        try await sink.wait(timeout: .seconds(60)) { count, _ in count == 162 }
        await group.triggerGracefulShutdown()
        try await run.value

        let records = try await readBack(
            TestWorld.resultTopicNames, from: cluster, as: RecordsByTopic.self, timeout: .seconds(30)
        ) {
            $0.count >= 162
        }.records
        #expect(records["pushbridge.outcomes"]?.count == 144)
        #expect(records["pushbridge.invalid-tokens"]?.count == 9)
        let deadLetters = try #require(records["pushbridge.dead-letters"])
        #expect(deadLetters.count == 9)
        #expect(deadLetters.allSatisfy { $0.text.hasPrefix("not json") })
        #expect(deadLetters.allSatisfy { letter in letter.headers.contains { $0.name == "pushbridge-error" } })
        for letter in deadLetters {
            #expect(Array(letter.headers.prefix(2).map(\.name)) == ["trace", "tenant"])
            #expect(letter.headers.first?.value == nil, "a null header stays null")
            #expect(letter.headers.dropFirst().first?.value == [], "an empty header stays empty")
        }
        let committed = try await committedOffsets(cluster, group: "pushbridge", topic: "orders", partitions: 3)
        #expect(committed == [0: 30, 1: 30, 2: 30])
        await producer.close()
    }
}

// MARK: Kafka helpers

extension KafkaMessage {
    var text: String { self.value.map { String(decoding: $0, as: UTF8.self) } ?? "" }
}

/// Forwards to a sink and counts acknowledged records; a test waits on the count, woken by each acknowledgement.
final class CountingSink: RecordSink {
    private let base: any RecordSink
    private let state = AsyncCondition((count: 0, keys: Set<String>()))

    init(base: any RecordSink) { self.base = base }

    func publish(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) async {
        await self.base.publish(record, acknowledgement: self.counted(record, acknowledgement))
    }

    /// Takes what the base takes at once, as the pipeline's outcomes go in production.
    func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool {
        self.base.publishNow(record, acknowledgement: self.counted(record, acknowledgement))
    }

    private func counted(_ record: OutgoingRecord, _ acknowledgement: RecordAcknowledgement) -> RecordAcknowledgement {
        Counted(record: record, acknowledgement: acknowledgement, state: self.state)
    }

    /// Counts an acknowledged record, then passes the answer on (a failure with the record the base handed back).
    private final class Counted: RecordAcknowledgement, @unchecked Sendable {
        let record: OutgoingRecord
        let acknowledgement: RecordAcknowledgement
        let state: AsyncCondition<(count: Int, keys: Set<String>)>

        init(
            record: OutgoingRecord, acknowledgement: RecordAcknowledgement,
            state: AsyncCondition<(count: Int, keys: Set<String>)>
        ) {
            self.record = record
            self.acknowledgement = acknowledgement
            self.state = state
        }

        override func acknowledged() {
            self.state.withLock { state in
                state.count += 1
                if let key = self.record.key { state.keys.insert(String(decoding: key, as: UTF8.self)) }
            }
            self.acknowledgement.acknowledged()
        }

        override func failed(_ error: any Error, record: OutgoingRecord) {
            self.acknowledgement.failed(error, record: record)
        }
    }

    func flush(timeout: Duration) async throws { try await self.base.flush(timeout: timeout) }

    var acknowledged: Int { self.state.read { $0.count } }

    /// The keys of the acknowledged records, as text.
    var keys: Set<String> { self.state.read { $0.keys } }

    /// Waits until `condition` holds for the acknowledged count and keys; throws ``TimedOut`` after `timeout`.
    func wait(
        timeout: Duration, until condition: @escaping @Sendable (_ count: Int, _ keys: Set<String>) -> Bool
    ) async throws {
        try await waitUntil("acknowledged records", self.state, timeout: timeout) { condition($0.count, $0.keys) }
    }
}

@Suite("Pipeline instances in one group")
struct KafkaGroupPipelineTests {
    /// Keeps what the sink answers a record.
    final class Answers: RecordAcknowledgement, @unchecked Sendable {
        let failures = AsyncCondition<[(error: String, record: OutgoingRecord)]>([])

        override func acknowledged() {
            Issue.record("acknowledged although the broker refuses the topic")
        }

        override func failed(_ error: any Error, record: OutgoingRecord) {
            self.failures.withLock { $0.append(("\(error)", record)) }
        }
    }

    @Test(
        "a record the broker fails comes back to its acknowledgement as it was published (key, value, headers, a null one), for the pipeline to publish again"
    )
    func failedRecordComesBack() async throws {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        defer { cluster.close() }
        try cluster.createTopic("pushbridge.outcomes", partitionCount: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster), logger: quietLogger()).running()
        try await producer.send(topic: "pushbridge.outcomes", key: nil, value: Array("warm-up".utf8))
        try cluster.injectErrors([.topicAuthorizationFailed], on: .produce)
        let sent = OutgoingRecord(
            topic: "pushbridge.outcomes", key: Array("aa01".utf8), value: Array(#"{"status":"delivered"}"#.utf8),
            headers: [("pushbridge-app", Array("shop".utf8)), ("trace", nil), ("tenant", [])])
        let answers = Answers()
        #expect(KafkaRecordSink(producer: producer).publishNow(sent, acknowledgement: answers))
        let failure = await answers.failures.wait(deadline: .now + .seconds(30)) { $0.first }.value
        #expect(failure?.error.contains("TOPIC_AUTHORIZATION_FAILED") == true)
        #expect(failure?.record.topic == sent.topic)
        #expect(failure?.record.key == sent.key)
        #expect(failure?.record.value == sent.value)
        #expect(failure?.record.headers.map(\.0) == sent.headers.map(\.0))
        #expect(failure?.record.headers.map(\.1) == sent.headers.map(\.1))
        await producer.close()
    }

    @Test("two instances split the partitions; when one stops, the other finishes everything")
    func twoInstances() async throws {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        defer { cluster.close() }
        try cluster.createTopic("orders", partitionCount: 4)
        try cluster.createTopic("pushbridge.outcomes", partitionCount: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster), logger: quietLogger()).running()
        let eventCount = 800
        for index in 0..<eventCount {
            try await producer.send(
                topic: "orders", key: nil, value: Array(#"{"tokens":["aa\#(index)"]}"#.utf8),
                partition: Int32(index % 4)
            )
        }
        func instance(_ sink: CountingSink) -> (Pipeline, ServiceGroup, KafkaEventSource) {
            let source = KafkaEventSource(
                configuration: consumerConfiguration(cluster, group: "pushbridge"), topics: ["orders"],
                logger: quietLogger()
            )
            let pipeline = Pipeline(
                source: source, mapper: TokensMapper(expiration: nil),
                sender: ScriptedSender { _ in
                    try? await Task.sleep(for: .milliseconds(40))
                    return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
                },
                sink: sink, configuration: PipelineConfiguration(maxInFlight: 10, drainTimeout: .seconds(10)),
                metrics: BridgeMetrics(), logger: quietLogger()
            )
            let group = ServiceGroup(
                configuration: .init(services: [.init(service: pipeline)], logger: quietLogger())
            )
            return (pipeline, group, source)
        }
        let sinkA = CountingSink(base: KafkaRecordSink(producer: producer))
        let sinkB = CountingSink(base: KafkaRecordSink(producer: producer))
        let (_, groupA, _) = instance(sinkA)
        let (pipelineB, groupB, sourceB) = instance(sinkB)
        let runA = Task { try await groupA.run() }
        try await sinkA.wait(timeout: .seconds(30)) { count, _ in count > 0 }
        let runB = Task { try await groupB.run() }
        // B only gets work once the group rebalanced and split the partitions.
        try await sinkB.wait(timeout: .seconds(30)) { count, _ in count > 0 }
        #expect(sinkA.acknowledged < eventCount)
        await groupA.triggerGracefulShutdown()
        try await runA.value
        // Both sinks' keys: woken by A's or B's acknowledgements, whichever comes (A stopped; B finishes the rest).
        try await sinkB.wait(timeout: .seconds(60)) { _, keys in sinkA.keys.union(keys).count == eventCount }
        // Every outcome exists, but A's last commit may have been refused during the rebalance (the mock answers
        // REBALANCE_IN_PROGRESS), so B must also have fetched and finished what A processed after its last
        // commit, before it stops and commits.
        _ = try await eventually(timeout: .seconds(60), every: .milliseconds(100)) {
            let lags = await sourceB.lag(timeout: .seconds(2))
            return lags.count == 4 && lags.allSatisfy { $0.lagMessageCount == 0 } && pipelineB.inFlight == 0
        }
        await groupB.triggerGracefulShutdown()
        try await runB.value

        let expected = sinkA.acknowledged + sinkB.acknowledged
        let outcomes = try await readBack(
            ["pushbridge.outcomes"], from: cluster, as: RecordsByTopic.self, timeout: .seconds(30)
        ) {
            $0.count >= expected
        }.records
        let tokens = Set(
            (outcomes["pushbridge.outcomes"] ?? []).compactMap {
                $0.key.map { String(decoding: $0, as: UTF8.self) }
            })
        let missing = Set((0..<eventCount).map { "aa\($0)" }).subtracting(tokens)
        #expect(missing.isEmpty, "outcomes missing for \(missing.count) notifications")
        let committed = try await committedOffsets(cluster, group: "pushbridge", topic: "orders", partitions: 4)
        #expect(committed == [0: 200, 1: 200, 2: 200, 3: 200])
        await producer.close()
    }
}

@Suite("Kafka source offsets")
struct KafkaSourceOffsetTests {
    /// Remembers what the source told it, and finishes partition 1 up to offset 8 while it is being revoked
    /// (as the pipeline finishes a revoked partition's in-flight events).
    final class Listener: RebalanceListener {
        let source = Mutex<KafkaEventSource?>(nil)
        let revocations = Atomic<Int>(0)

        func partitionsAssigned(_ partitions: [PartitionID], generation: UInt64) async {}

        func partitionsRevoked(_ partitions: [PartitionID]) async {
            if self.revocations.add(1, ordering: .relaxed).newValue == 1 {
                self.source.withLock { $0 }?.markFinished(PartitionID(topic: "orders", partition: 1), nextOffset: 8)
            }
        }
    }

    @Test("offsets finished before and during a revocation are committed (the source keeps them until a commit)")
    func revocationCommitsFinishedOffsets() async throws {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        defer { cluster.close() }
        try cluster.createTopic("orders", partitionCount: 2)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster), logger: quietLogger()).running()
        for index in 0..<20 {
            try await producer.send(
                topic: "orders", key: nil, value: Array("e\(index)".utf8), partition: Int32(index % 2))
        }
        await producer.close()

        let source = KafkaEventSource(
            configuration: consumerConfiguration(cluster, group: "pushbridge"), topics: ["orders"],
            logger: quietLogger()
        )
        let listener = Listener()
        listener.source.withLock { $0 = source }
        let events = try await source.start(listener: listener)
        var received = 0
        for try await batch in events {
            received += batch.count
            if received >= 20 { break }
        }
        // Finished while assigned: the source keeps it until a commit.
        source.markFinished(PartitionID(topic: "orders", partition: 0), nextOffset: 5)
        // Closing commits, then revokes everything: what the listener finishes during the revocation is
        // committed by the revocation's own commit, the last one.
        await source.close()
        #expect(listener.revocations.load(ordering: .relaxed) == 1)
        let committed = try await committedOffsets(cluster, group: "pushbridge", topic: "orders", partitions: 2)
        #expect(committed == [0: 5, 1: 8])
    }
}
