import CRdKafka

/// librdkafka's mock-cluster calls, for ``KafkaMockCluster``.
enum RDKafkaMock {
    /// The brokers' `host:port` list.
    static func bootstrapServers(_ cluster: OpaquePointer) -> String {
        rd_kafka_mock_cluster_bootstraps(cluster).map { String(cString: $0) } ?? ""
    }

    static func createTopic(
        _ cluster: OpaquePointer, _ topic: String, partitionCount: Int32, replicationFactor: Int32
    ) -> KafkaError? {
        Self.failure(rd_kafka_mock_topic_create(cluster, topic, partitionCount, replicationFactor))
    }

    static func setBroker(_ cluster: OpaquePointer, _ brokerID: Int32, up: Bool) -> KafkaError? {
        Self.failure(
            up ? rd_kafka_mock_broker_set_up(cluster, brokerID) : rd_kafka_mock_broker_set_down(cluster, brokerID))
    }

    /// The next `codes.count` requests of `apiKey` fail with `codes`, in order.
    static func pushRequestErrors(
        _ cluster: OpaquePointer, _ codes: [KafkaError.Code], apiKey: Int16
    ) -> KafkaError? {
        codes.map(\.resp).withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, $0.count, $0.baseAddress)
        }
        return nil
    }

    private static func failure(_ error: rd_kafka_resp_err_t) -> KafkaError? {
        error == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(error)
    }
}
