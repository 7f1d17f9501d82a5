import Foundation
import Kafka
import TestSupport
import Testing

// The high watermark PushBridge reports (queryWatermarks, lag) must be the partition's end even where a broker
// answers ListOffsets(latest) with a stale offset, as Tansu 0.6.0 does: the high watermark of the fetch responses
// wins where there is one. The same checks run on the mock cluster, whose ListOffsets answer is right.

/// Produces `count` messages to partition 0 of `topic` in one batch (one record batch of `count` records, which
/// is what makes Tansu's ListOffsets answer stale: it answers the batch's first offset + 1), reads them back with
/// a consumer that joins no group, and returns that consumer (it has fetched up to the end).
private func producedAndFetched(
    _ broker: some TestKafkaBroker, topic: String, count: Int
) async throws -> KafkaConsumer {
    try await broker.addTopic(topic, partitions: 1)
    var configuration = KafkaProducerConfiguration(bootstrapServers: broker.bootstrapServers)
    configuration.linger = .milliseconds(200)
    let producer = try KafkaProducer(configuration: configuration, logger: testLogger("watermarks")).running()
    try await produce(producer, topic: topic, count: count, partitionCount: 1)
    await producer.close()
    let consumer = try KafkaConsumer(
        configuration: consumerConfiguration(broker, group: "watermarks-\(UUID())"),
        readingFromStart: [KafkaPartition(topic: topic, partition: 0)], logger: testLogger("watermarks")
    ).running()
    let received = try await read(consumer) { $0.count >= count }
    #expect(received.count == count)
    return consumer
}

@Suite(
    "Watermarks on a real broker (Tansu)",
    .tansuInstalled, .sharedTansuBroker,
    .timeLimit(.minutes(1))
)
struct RealBrokerWatermarkTests {
    @Test("queryWatermarks and lag give the partition's end although Tansu's ListOffsets answer is stale")
    func highWatermarkIsTheEndDespiteAStaleListOffsets() async throws {
        let broker = try TansuBroker.current()
        let topic = "watermarks-\(UUID().uuidString.prefix(8))"
        let consumer = try await producedAndFetched(broker, topic: topic, count: 5)
        defer { Task { await consumer.close() } }
        let partition = KafkaPartition(topic: topic, partition: 0)
        let (low, high) = try await consumer.queryWatermarks(for: partition, timeout: .seconds(5))
        #expect(low == 0)
        #expect(high == 5)
        let lag = try #require(try consumer.lag(for: [partition]).first)
        #expect(lag.highWatermark == 5)
        #expect(lag.lagMessageCount == 0)
    }
}

@Suite("Watermarks on the mock cluster")
struct MockClusterWatermarkTests {
    @Test("queryWatermarks after a fetch gives the partition's end, as the broker's ListOffsets answer does")
    func highWatermarkAfterAFetch() async throws {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        defer { cluster.close() }
        let consumer = try await producedAndFetched(cluster, topic: "watermarks", count: 5)
        defer { Task { await consumer.close() } }
        let (low, high) = try await consumer.queryWatermarks(
            for: KafkaPartition(topic: "watermarks", partition: 0), timeout: .seconds(5))
        #expect(low == 0)
        #expect(high == 5)
    }

    @Test("queryWatermarks before any fetch asks the broker (ListOffsets)")
    func highWatermarkBeforeAnyFetch() async throws {
        let cluster = try makeCluster(topic: "unfetched", partitionCount: 1)
        defer { cluster.close() }
        let producer = try makeProducer(cluster)
        for index in 0..<3 {
            try await producer.send(topic: "unfetched", key: nil, value: Array("m-\(index)".utf8), partition: 0)
        }
        await producer.close()
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "unfetched"), readingFromStart: [],
            logger: testLogger("unfetched")
        ).running()
        defer { Task { await consumer.close() } }
        let (_, high) = try await consumer.queryWatermarks(
            for: KafkaPartition(topic: "unfetched", partition: 0), timeout: .seconds(5))
        #expect(high == 3)
    }
}
