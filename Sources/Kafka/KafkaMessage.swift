/// One partition of a topic.
package struct KafkaPartition: Sendable, Hashable, CustomStringConvertible {
    /// The topic name.
    package var topic: String
    /// The partition number.
    package var partition: Int32

    /// Creates a partition identifier.
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    /// `topic[partition]`.
    package var description: String { "\(self.topic)[\(self.partition)]" }
}

/// A message header. Names may repeat within one message; a value may be null.
package struct KafkaHeader: Sendable, Hashable {
    /// The header name.
    package var name: String
    /// The value bytes; `nil` for a null value.
    package var value: [UInt8]?

    /// Creates a header.
    package init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

/// A consumed message, copied out of librdkafka.
///
/// Its properties are constants: an explicit initialiser of a struct with `var` properties copies the new value once
/// more (docs/architecture.md, "The parts and their boundaries"), and every consumed message is made by one.
package struct KafkaMessage: Sendable {
    /// The topic.
    package let topic: String
    /// The partition.
    package let partition: Int32
    /// The message's offset in its partition; the offset to store once it is finished is `offset + 1`.
    package let offset: Int64
    /// The key; `nil` when the message has none.
    package let key: [UInt8]?
    /// The value; `nil` for a tombstone.
    package let value: [UInt8]?
    /// The headers, in order.
    package let headers: [KafkaHeader]
    /// The message timestamp in milliseconds since the epoch, when the broker reports one.
    package let timestampMilliseconds: Int64?
    /// The assignment the message was fetched under: the generation
    /// ``KafkaRebalanceListener/partitionsAssigned(_:generation:)`` announced for its partition. A message
    /// whose generation is older than its partition's current one was fetched before a revocation and will
    /// be fetched again from the committed offset.
    package let assignmentGeneration: UInt64

    /// Creates a message (for tests and adapters; consumers receive them from ``KafkaConsumer/batches``).
    package init(
        topic: String,
        partition: Int32,
        offset: Int64,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader],
        timestampMilliseconds: Int64?,
        assignmentGeneration: UInt64 = 0
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
        self.assignmentGeneration = assignmentGeneration
    }

    /// The bytes the message holds: key, value and headers.
    package var byteCount: Int {
        var count = (self.key?.count ?? 0) + (self.value?.count ?? 0)
        for header in self.headers {
            count += header.name.utf8.count + (header.value?.count ?? 0)
        }
        return count
    }

    /// The partition the message came from.
    package var kafkaPartition: KafkaPartition {
        KafkaPartition(topic: self.topic, partition: self.partition)
    }
}

/// Where the broker stored a produced message.
public struct KafkaDelivery: Sendable, Hashable {
    /// The partition it was written to.
    package var partition: KafkaPartition
    /// Its offset; `nil` when librdkafka does not know it (a retried message of the idempotent producer).
    package var offset: Int64?
}

/// A partition's offsets as the consumer sees them.
package struct KafkaPartitionLag: Sendable, Hashable {
    /// The partition.
    package var partition: KafkaPartition
    /// The oldest offset on the broker.
    package var lowWatermark: Int64
    /// The offset the next produced message will get.
    package var highWatermark: Int64
    /// The offset of the next message this consumer will fetch; `nil` before it fetched anything.
    package var position: Int64?
    /// The group's committed offset, when it was asked for and there is one.
    package var committed: Int64?

    /// Messages not yet consumed: `highWatermark - position` (or `- lowWatermark` before the first fetch).
    package var lagMessageCount: Int64 {
        max(0, self.highWatermark - (self.position ?? self.lowWatermark))
    }

    /// Messages not yet committed: `highWatermark - committed` (or `- lowWatermark` while nothing is
    /// committed). Unlike ``lagMessageCount`` it counts what was fetched but not finished, so a partition
    /// stuck on one event shows its lag growing.
    package var uncommittedMessageCount: Int64 {
        max(0, self.highWatermark - max(self.committed ?? self.lowWatermark, self.lowWatermark))
    }
}
