import CRdKafka
import Logging
import Synchronization

/// One metadata request on a client of its own (``KafkaMetadata/fetch(bootstrapServers:properties:timeout:)``).
enum RDKafkaMetadataRequest {
    /// Blocks until the cluster answered or `timeoutMilliseconds` passed; call it on a thread of its own.
    static func send(
        properties ordered: [(String, String)], bootstrapServers: String, timeoutMilliseconds: Int32
    ) throws -> KafkaMetadata {
        // The errors are only read for their cause: nothing is logged.
        var silent = Logger(label: "pushbridge.kafka.metadata")
        silent.logLevel = .critical
        let callbacks = RDKafkaCallbacks(logger: silent)
        let client = try RDKafkaClient.make(.producer, properties: ordered, callbacks: callbacks)
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
