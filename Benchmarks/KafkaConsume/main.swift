// Consume throughput of the Swift Kafka layer against a plain C loop over the same librdkafka, on one mock
// cluster. Run with `make bench-kafka` (release build). See docs/benchmarks.md.
import Foundation
import Kafka
import KafkaConsumeC
import Logging

let messageCount = Int(ProcessInfo.processInfo.environment["BENCH_MESSAGES"] ?? "") ?? 200_000
let valueByteCount = 100
let partitionCount: Int32 = 8
let topic = "bench"
let logger: Logger = {
    var logger = Logger(label: "bench-kafka")
    logger.logLevel = .error
    return logger
}()

func preload(_ cluster: KafkaMockCluster) async throws {
    var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
    configuration.linger = .milliseconds(5)
    configuration.properties = ["log_level": "0"]
    let producer = try KafkaProducer(configuration: configuration, logger: logger).running()
    let value = [UInt8](repeating: UInt8(ascii: "x"), count: valueByteCount)
    let chunk = 10_000
    for start in stride(from: 0, to: messageCount, by: chunk) {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in start..<min(start + chunk, messageCount) {
                group.addTask {
                    try await producer.send(
                        topic: topic, key: nil, value: value, partition: Int32(index) % partitionCount)
                }
            }
            try await group.waitForAll()
        }
    }
    await producer.close()
}

/// Seconds from the first batch to the last message through ``KafkaConsumer``, touching every value byte.
func consumeSwift(_ cluster: KafkaMockCluster, group: String) async throws -> Double {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
    configuration.autoOffsetReset = .earliest
    configuration.properties = ["log_level": "0"]
    let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: logger).running()
    var received = 0
    var checksum = 0
    var started: ContinuousClock.Instant?
    for try await batch in consumer.batches {
        if started == nil {
            started = .now
        }
        for message in batch {
            for byte in message.value ?? [] {
                checksum &+= Int(byte)
            }
        }
        received += batch.count
        if received >= messageCount {
            break
        }
    }
    let elapsed = started.map { ContinuousClock.now - $0 } ?? .zero
    await consumer.close()
    guard checksum == received * valueByteCount * Int(UInt8(ascii: "x")) else {
        throw KafkaError(code: .invalidArgument, message: "checksum mismatch")
    }
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func consumeC(_ cluster: KafkaMockCluster, group: String) throws -> Double {
    var errorText = [CChar](repeating: 0, count: 512)
    let seconds = kafka_consume_c(cluster.bootstrapServers, topic, group, messageCount, &errorText, errorText.count)
    guard seconds >= 0 else {
        throw KafkaError(
            code: .invalidArgument,
            message: String(
                decoding: errorText.prefix { $0 != 0 }.map {
                    UInt8(bitPattern: $0)
                }, as: UTF8.self))
    }
    return seconds
}

let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
try cluster.createTopic(topic, partitionCount: partitionCount)
print("preloading \(messageCount) messages of \(valueByteCount) bytes into \(partitionCount) partitions")
try await preload(cluster)

var cRates: [Double] = []
var swiftRates: [Double] = []
for round in 1...3 {
    let cSeconds = try consumeC(cluster, group: "bench-c-\(round)")
    let swiftSeconds = try await consumeSwift(cluster, group: "bench-swift-\(round)")
    cRates.append(Double(messageCount) / cSeconds)
    swiftRates.append(Double(messageCount) / swiftSeconds)
    print(
        String(
            format: "round %d: C loop %.0f msgs/s, Swift layer %.0f msgs/s", round, cRates.last!,
            swiftRates.last!))
}
let bestC = cRates.max()!
let bestSwift = swiftRates.max()!
print(
    String(
        format: "best: C loop %.0f msgs/s, Swift layer %.0f msgs/s, ratio %.2f", bestC, bestSwift,
        bestSwift / bestC))
