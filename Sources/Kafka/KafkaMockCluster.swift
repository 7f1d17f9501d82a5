/// An in-process Kafka cluster: librdkafka's mock cluster, with brokers listening on loopback, so any
/// Kafka client (this module's, `kcat`) can connect to ``bootstrapServers``. It backs
/// `kafka.bootstrap_servers: embedded`, `pushbridge demo` and the tests.
///
/// Its limits are librdkafka's: it keeps about 5 MiB per partition, and a consumer group's first join waits
/// about 3 seconds (`group.initial.rebalance.delay`).
package final class KafkaMockCluster: Sendable {
    private let client: RDKafkaClient

    /// The brokers' `host:port` list, for `bootstrap.servers`.
    package let bootstrapServers: String
    /// The broker ids: `1...brokerCount`.
    package let brokerIDs: ClosedRange<Int32>

    /// Starts a cluster of `brokerCount` brokers. `properties` configure the librdkafka handle that hosts
    /// it (e.g. `log_level`).
    package init(brokerCount: Int32 = 1, properties: [String: String] = [:]) throws(KafkaError) {
        guard brokerCount >= 1 else {
            throw KafkaError(code: .invalidArgument, message: "a mock cluster needs at least 1 broker")
        }
        let client = try RDKafkaClient.makeMockCluster(
            brokerCount: brokerCount,
            properties: properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        )
        self.client = client
        self.brokerIDs = 1...brokerCount
        self.bootstrapServers = client.mockCluster.map(RDKafkaMock.bootstrapServers) ?? ""
    }

    deinit {
        self.destroy()
    }

    /// Creates `topic` with `partitionCount` partitions. Creating an existing topic fails.
    package func createTopic(_ topic: String, partitionCount: Int32, replicationFactor: Int32 = 1) throws {
        try self.call("creating topic \(topic)") {
            RDKafkaMock.createTopic($0, topic, partitionCount: partitionCount, replicationFactor: replicationFactor)
        }
    }

    /// Takes broker `brokerID` down: its connections close and new ones are refused until ``setBrokerUp(_:)``.
    package func setBrokerDown(_ brokerID: Int32) throws {
        try self.call("taking broker \(brokerID) down") { RDKafkaMock.setBroker($0, brokerID, up: false) }
    }

    /// Brings broker `brokerID` back up.
    package func setBrokerUp(_ brokerID: Int32) throws {
        try self.call("bringing broker \(brokerID) up") { RDKafkaMock.setBroker($0, brokerID, up: true) }
    }

    /// Makes the next `errors.count` requests of type `request` (on any broker) fail with `errors`, in order.
    /// `_TRANSPORT` makes the broker drop the connection instead.
    package func injectErrors(_ errors: [KafkaError.Code], on request: RequestType) throws {
        try self.call("injecting errors") { RDKafkaMock.pushRequestErrors($0, errors, apiKey: request.apiKey) }
    }

    /// Stops the brokers and frees the cluster. Clients still connected see their connections drop.
    /// Also done when the cluster is released.
    package func close() {
        self.destroy()
    }

    /// The cluster's thread ends on a call too (terminate), which ``MockClusterWaker`` keeps from waiting a second.
    private func destroy() {
        MockClusterWaker.shared.whileWaiting(on: self.bootstrapServers) { self.client.destroy() }
    }

    private func call(_ what: String, _ body: (OpaquePointer) -> KafkaError?) throws {
        try self.client.withHandle { _ in
            guard let cluster = self.client.mockCluster else {
                return
            }
            let error = MockClusterWaker.shared.whileWaiting(on: self.bootstrapServers) { body(cluster) }
            if let error {
                throw KafkaError(code: error.code, message: "\(what): \(error.message)")
            }
        }
    }

    /// A Kafka protocol request type, by its API key.
    package struct RequestType: Sendable, Hashable {
        /// The Kafka protocol API key.
        package var apiKey: Int16

        /// Wraps an API key.
        package init(apiKey: Int16) {
            self.apiKey = apiKey
        }

        /// Produce (0).
        package static let produce = RequestType(apiKey: 0)
        /// Fetch (1).
        package static let fetch = RequestType(apiKey: 1)
        /// ListOffsets (2).
        package static let listOffsets = RequestType(apiKey: 2)
        /// OffsetCommit (8).
        package static let offsetCommit = RequestType(apiKey: 8)
        /// OffsetFetch (9).
        package static let offsetFetch = RequestType(apiKey: 9)
        /// FindCoordinator (10).
        package static let findCoordinator = RequestType(apiKey: 10)
        /// JoinGroup (11).
        package static let joinGroup = RequestType(apiKey: 11)
        /// Heartbeat (12).
        package static let heartbeat = RequestType(apiKey: 12)
        /// InitProducerId (22), which the idempotent producer sends first.
        package static let initProducerID = RequestType(apiKey: 22)
    }
}
