/// One consumed event, as the mapper needs it: where it came from and what it carries.
public struct RoutingEvent: Sendable {
    /// The Kafka topic.
    public var topic: String
    /// The partition.
    public var partition: Int32
    /// The offset within the partition.
    public var offset: Int64
    /// The key bytes, `nil` when the event has no key. Templates see them as UTF-8 text (`_kafka.key`).
    public var key: [UInt8]?
    /// The broker timestamp in milliseconds since the epoch (`_kafka.timestamp`).
    public var timestampMilliseconds: Int64?
    /// The headers in order; a name may repeat (templates see the last value, `_headers.<name>`).
    public var headers: [(name: String, value: [UInt8])]
    /// The value bytes: a UTF-8 JSON document, or `nil` for a tombstone.
    public var value: [UInt8]?

    /// Creates an event.
    public init(
        topic: String,
        partition: Int32,
        offset: Int64,
        key: [UInt8]? = nil,
        timestampMilliseconds: Int64? = nil,
        headers: [(name: String, value: [UInt8])] = [],
        value: [UInt8]?
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.timestampMilliseconds = timestampMilliseconds
        self.headers = headers
        self.value = value
    }
}
