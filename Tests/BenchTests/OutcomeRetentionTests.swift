import BenchSupport
import Bridge
import BridgeCore
import Foundation
import Kafka
import Logging
import Routing
import TestSupport
import Testing

/// `make bench` counts every outcome record it reads back from librdkafka's mock cluster, which keeps only about
/// 5 MiB per partition and drops the oldest records beyond that. The bridge keys each outcome by its device token,
/// so the benchmark's device tokens must spread the outcomes over the outcome topic's partitions.
///
/// With nghttpd as the server the benchmark once gave every event the same device token (nghttpd answers 200 only
/// for a path it has a file for): every outcome went to one partition, the mock kept the newest ~8 500, and the
/// benchmark waited for the others until it timed out. That read as "the bridge stalled after about 8 500
/// requests"; the bridge had delivered and published everything.
@Suite(.timeLimit(.minutes(2)))
struct OutcomeRetentionTests {
    static let topic = "bench.outcomes"
    static let eventCount = 20_000

    @Test func outcomesOfTheBenchmarkEventsAllStayInTheMockCluster() async throws {
        let lost = try await Self.produceOutcomes {
            EventFactory.deviceToken($0, cycle: EventFactory.defaultTokenCount)
        }
        #expect(lost.isEmpty, "the mock dropped the oldest outcomes of partitions \(lost)")
    }

    /// The cause of the old stall, shown: the same records under one device token lose all but the newest ~5 MiB.
    @Test func oneDeviceTokenForEveryEventLosesTheOldestOutcomes() async throws {
        let lost = try await Self.produceOutcomes(deviceToken: { _ in EventFactory.deviceToken(0) })
        #expect(lost.count == 1)
        let dropped = lost.values.reduce(0, +)
        // 20 000 outcomes of ~620 bytes are ~12 MB, in one partition that keeps 5 MiB.
        #expect(dropped > 10_000 && dropped < 13_000, "dropped \(dropped)")
    }

    /// Produces the outcome records of the benchmark's first ``eventCount`` events, as the bridge writes them, to a
    /// topic sized like the benchmark's; returns the records the mock dropped, by partition.
    static func produceOutcomes(deviceToken: (Int) -> String) async throws -> [Int32: Int64] {
        let logger = Logger(label: "bench-tests")
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "3"])
        defer { cluster.close() }
        let partitions = MockClusterSizing.partitionCount(
            records: Self.eventCount, bytesEach: MockClusterSizing.outcomeRecordBytes)
        try cluster.createTopic(Self.topic, partitionCount: partitions)
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.properties = ["log_level": "3"]
        let producer = try KafkaProducer(configuration: configuration, logger: logger).running()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<Self.eventCount {
                let record = Self.outcome(index, deviceToken: deviceToken(index), at: now)
                group.addTask {
                    try await producer.send(topic: Self.topic, key: record.key, value: record.encoded())
                }
            }
            try await group.waitForAll()
        }
        await producer.close()

        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "retention"), topics: [Self.topic], logger: logger
        ).running()
        var lost: [Int32: Int64] = [:]
        var kept: Int64 = 0
        for partition in 0..<partitions {
            let watermarks = try await consumer.queryWatermarks(
                for: KafkaPartition(topic: Self.topic, partition: partition), timeout: .seconds(10))
            if watermarks.low > 0 { lost[partition] = watermarks.low }
            kept += watermarks.high - watermarks.low
        }
        await consumer.close()
        #expect(kept + lost.values.reduce(0, +) == Int64(Self.eventCount))
        return lost
    }

    /// A delivered notification's outcome, as the bridge publishes it for event `index`.
    static func outcome(_ index: Int, deviceToken: String, at epochMilliseconds: Int64) -> OutcomeRecord {
        OutcomeRecord(
            notificationID: UUID().uuidString.lowercased(), route: "order-shipped",
            source: SourceCoordinates(
                topic: "orders.shipped", partition: Int32(index % 21), offset: Int64(index / 21),
                key: Array("customer-\(index)".utf8)),
            deviceToken: deviceToken, apnsTopic: "com.example.shop", pushType: "alert", priority: 10,
            status: .delivered, httpStatus: 200, reason: nil, apnsUniqueID: nil, attempts: 1,
            latencyMilliseconds: 36, sentAtEpochMilliseconds: epochMilliseconds - 36,
            completedAtEpochMilliseconds: epochMilliseconds)
    }
}
