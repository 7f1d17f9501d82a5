/// Where a consumer starts in a partition that has no committed offset (`auto.offset.reset`).
package enum KafkaOffsetReset: String, Sendable, Hashable {
    /// The oldest message still on the broker.
    case earliest
    /// Only messages produced after the consumer joined.
    case latest
    /// Fail with an error on the partition.
    case error
}

/// Settings of a ``KafkaConsumer``. Every optional property left `nil` keeps librdkafka's default;
/// ``properties`` passes any other librdkafka property verbatim (`security.protocol`, `sasl.*`, `ssl.*`).
package struct KafkaConsumerConfiguration: Sendable {
    /// `bootstrap.servers`: `host:port` pairs separated by commas.
    package var bootstrapServers: String
    /// `group.id`: the consumer group shared by all instances.
    package var groupID: String
    /// `client.id`.
    package var clientID: String?
    /// How often stored offsets are committed in the background (`auto.commit.interval.ms`).
    package var commitInterval: Duration?
    /// Whether librdkafka commits stored offsets in the background every ``commitInterval``
    /// (`enable.auto.commit`); it does so only while the group is stable. When `false`, offsets are committed only
    /// by ``KafkaConsumer/commit(timeout:)`` and, synchronously, when partitions are revoked and when the consumer
    /// closes.
    package var automaticCommits = true
    /// `session.timeout.ms`.
    package var sessionTimeout: Duration?
    /// `heartbeat.interval.ms`.
    package var heartbeatInterval: Duration?
    /// `max.poll.interval.ms`: how long the stream may go unread before this member leaves the group.
    package var maxPollInterval: Duration?
    /// `auto.offset.reset`.
    package var autoOffsetReset: KafkaOffsetReset?
    /// `partition.assignment.strategy`, e.g. `range,roundrobin` or `cooperative-sticky`.
    package var partitionAssignmentStrategy: String?
    /// More librdkafka properties, applied as given (before the settings above, which win).
    package var properties: [String: String]

    /// The most messages in one batch of ``KafkaConsumer/batches``.
    package var maxBatchMessageCount: Int = 1000
    /// The most bytes (keys, values and headers) in one batch: a batch ends at the message that reaches it, so
    /// the buffer holds at most ``bufferedBatchCount`` times this plus one message each, whatever the
    /// messages' size.
    package var maxBatchBytes: Int = 4 << 20
    /// How many batches wait in memory for the reader before polling stops (the bounded buffer).
    package var bufferedBatchCount: Int = 4
    /// How long one poll waits for the first message of a batch.
    package var pollTimeout: Duration = .milliseconds(100)
    /// The longest the poll thread waits for a ``KafkaRebalanceListener`` before it completes the
    /// rebalance anyway.
    package var rebalanceListenerTimeout: Duration = .seconds(30)
    /// The longest ``KafkaConsumer/close()`` waits for librdkafka to commit and leave the group (it can
    /// wait for an unreachable coordinator up to the session timeout); after it, close returns and librdkafka
    /// finishes in the background. What was not committed is consumed again: at-least-once holds.
    package var closeTimeout: Duration = .seconds(10)
    /// Whether ``KafkaConsumer/resume(_:)`` wakes the resumed partitions' fetchers (a seek, and another once the
    /// local queue is empty). Always on in the product; off only where a test measures the wake-up against its
    /// absence in the same run, which is what makes that measure independent of the host's speed.
    package var wakesFetchersOnResume = true

    /// Creates a configuration for the group `groupID` on `bootstrapServers`.
    package init(bootstrapServers: String, groupID: String, properties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
        self.properties = properties
    }

    /// The librdkafka properties, in the order they are applied. The layer's own invariants come last:
    /// offsets are stored only by ``KafkaConsumer/storeOffset(_:for:)`` (and committed in the background unless
    /// ``automaticCommits`` is off).
    var librdkafkaProperties: [(String, String)] {
        var result = self.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        result.append(("bootstrap.servers", self.bootstrapServers))
        result.append(("group.id", self.groupID))
        result.appendIfSet("client.id", self.clientID)
        result.appendIfSet("auto.commit.interval.ms", self.commitInterval.map(\.kafkaMilliseconds))
        result.appendIfSet("session.timeout.ms", self.sessionTimeout.map(\.kafkaMilliseconds))
        result.appendIfSet("heartbeat.interval.ms", self.heartbeatInterval.map(\.kafkaMilliseconds))
        result.appendIfSet("max.poll.interval.ms", self.maxPollInterval.map(\.kafkaMilliseconds))
        result.appendIfSet("auto.offset.reset", self.autoOffsetReset?.rawValue)
        result.appendIfSet("partition.assignment.strategy", self.partitionAssignmentStrategy)
        result.append(("enable.auto.offset.store", "false"))
        result.append(("enable.auto.commit", self.automaticCommits ? "true" : "false"))
        return result
    }
}

/// Settings of a ``KafkaProducer``. Every optional property left `nil` keeps librdkafka's default;
/// ``properties`` passes any other librdkafka property verbatim. Idempotence and `acks=all` are always on.
package struct KafkaProducerConfiguration: Sendable {
    /// `bootstrap.servers`: `host:port` pairs separated by commas.
    package var bootstrapServers: String
    /// `client.id`.
    package var clientID: String?
    /// `linger.ms`: how long messages wait to fill a batch.
    package var linger: Duration?
    /// `message.timeout.ms`: how long a message may take, retries included, before it fails.
    package var messageTimeout: Duration?
    /// `queue.buffering.max.messages`: the most messages waiting in the local queue.
    package var maxQueuedMessageCount: Int?
    /// `compression.type`, e.g. `lz4` or `zstd`.
    package var compression: String?
    /// More librdkafka properties, applied as given (before the settings above, which win).
    package var properties: [String: String]

    /// Creates a configuration for `bootstrapServers`.
    package init(bootstrapServers: String, properties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.properties = properties
    }

    /// The librdkafka properties, in the order they are applied; the delivery guarantees come last.
    var librdkafkaProperties: [(String, String)] {
        var result = self.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        result.append(("bootstrap.servers", self.bootstrapServers))
        result.appendIfSet("client.id", self.clientID)
        result.appendIfSet("linger.ms", self.linger.map(\.kafkaMilliseconds))
        result.appendIfSet("message.timeout.ms", self.messageTimeout.map(\.kafkaMilliseconds))
        result.appendIfSet("queue.buffering.max.messages", self.maxQueuedMessageCount.map(String.init))
        result.appendIfSet("compression.type", self.compression)
        result.append(("enable.idempotence", "true"))
        result.append(("acks", "all"))
        return result
    }
}

extension [(String, String)] {
    fileprivate mutating func appendIfSet(_ name: String, _ value: String?) {
        if let value {
            self.append((name, value))
        }
    }
}

extension Duration {
    /// Whole milliseconds as librdkafka wants them in `*.ms` properties (at least 1 for a positive duration).
    var kafkaMilliseconds: String {
        String(self.milliseconds)
    }

    /// Whole milliseconds, rounded up so that a positive duration never becomes 0; clamped to `Int32`.
    var milliseconds: Int32 {
        let (seconds, attoseconds) = self.components
        // Seconds beyond Int32's milliseconds clamp before multiplying, so no duration can overflow.
        guard seconds < Int64(Int32.max) else { return .max }
        guard seconds > Int64(Int32.min) else { return .min }
        let total = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: total)
    }
}
