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
            try RDKafkaMetadataRequest.send(
                properties: ordered, bootstrapServers: bootstrapServers, timeoutMilliseconds: timeoutMilliseconds)
        }
    }
}
