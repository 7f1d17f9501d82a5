import CRdKafka
import Logging
import Synchronization

/// What a cluster says about itself: its brokers and its topics (one metadata request).
package struct KafkaMetadata: Sendable, Hashable {
    /// The number of brokers the cluster reports.
    package var brokerCount: Int
    /// Every topic the cluster reports without an error, with its partition count.
    package var partitionCountsByTopic: [String: Int]

    /// Creates a snapshot.
    package init(brokerCount: Int, partitionCountsByTopic: [String: Int]) {
        self.brokerCount = brokerCount
        self.partitionCountsByTopic = partitionCountsByTopic
    }

    /// Asks the cluster at `bootstrapServers` for its brokers and all its topics (never creating one), waiting at
    /// most `timeout`. `properties` are passed to librdkafka (security settings); librdkafka's own log lines are
    /// off unless `log_level` is given. Throws ``KafkaError`` (`_TRANSPORT`, `_TIMED_OUT`, ...) when no broker
    /// answers in time, with its ``KafkaError/knownCause`` when librdkafka's errors showed one.
    package static func fetch(
        bootstrapServers: String,
        properties: [String: String] = [:],
        timeout: Duration
    ) async throws -> KafkaMetadata {
        var settings = ["log_level": "0"]
        settings.merge(properties) { _, given in given }
        settings["bootstrap.servers"] = bootstrapServers
        let ordered = settings.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let timeoutMilliseconds = Int32(
            clamping: timeout.components.seconds * 1000
                + timeout.components.attoseconds / 1_000_000_000_000_000)
        // A client of its own for this one request, on a thread of its own.
        let calls = BlockingCalls(name: "kafka-metadata", maximumThreads: 1)
        defer { calls.stop() }
        return try await calls.run {
            // The errors are only read for their cause: nothing is logged.
            var silent = Logger(label: "pushbridge.kafka.metadata")
            silent.logLevel = .critical
            let callbacks = RDKafkaCallbacks(logger: silent)
            let client = try RDKafkaClient.make(RD_KAFKA_PRODUCER, properties: ordered, callbacks: callbacks)
            defer { client.destroy() }
            return try client.withHandle { handle throws(KafkaError) in
                var metadata: UnsafePointer<rd_kafka_metadata>?
                let result = rd_kafka_metadata(handle, 1, nil, &metadata, timeoutMilliseconds)
                guard result == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                    var error = KafkaError(result, context: "metadata request to \(bootstrapServers)")
                    // librdkafka queues its errors for rd_kafka_poll, which serves them to the error callback.
                    _ = rd_kafka_poll(handle, 0)
                    error.knownCause = callbacks.knownCause.withLock { $0 }
                    throw error
                }
                defer { rd_kafka_metadata_destroy(metadata) }
                var topics: [String: Int] = [:]
                let count = Int(metadata.pointee.topic_cnt)
                if count > 0, let list = metadata.pointee.topics {
                    for index in 0..<count where list[index].err == RD_KAFKA_RESP_ERR_NO_ERROR {
                        guard let name = list[index].topic else { continue }
                        topics[String(cString: name)] = Int(list[index].partition_cnt)
                    }
                }
                return KafkaMetadata(brokerCount: Int(metadata.pointee.broker_cnt), partitionCountsByTopic: topics)
            }
        }
    }
}
