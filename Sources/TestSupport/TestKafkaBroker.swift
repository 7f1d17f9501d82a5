import Kafka

/// A broker the Kafka tests run against: librdkafka's mock cluster or a real broker process.
package protocol TestKafkaBroker: Sendable {
    /// `host:port` pairs for `bootstrap.servers`.
    var bootstrapServers: String { get }
    /// Creates `topic` with `partitions` partitions.
    func addTopic(_ topic: String, partitions: Int32) async throws
}

extension KafkaMockCluster: TestKafkaBroker {
    package func addTopic(_ topic: String, partitions: Int32) async throws {
        try self.createTopic(topic, partitionCount: partitions)
    }
}
