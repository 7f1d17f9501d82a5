/// Where an event came from: the coordinates every record carries back to Kafka.
package struct SourceCoordinates: Sendable, Hashable {
    /// The input topic.
    package let topic: String
    /// The input partition.
    package let partition: Int32
    /// The event's offset in that partition.
    package let offset: Int64
    /// The event's key bytes, if it had one.
    package let key: [UInt8]?

    /// Creates source coordinates.
    package init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
    }
}

/// One consumed event, from the broker adapter through the pipeline to the mapper: the only shape an event
/// takes after the Kafka source read it (templates see it as `_kafka.*` and `_headers.*`).
///
/// An immutable object, not a struct: the consume loop, the pipeline's asynchronous steps and the mapper's scope each
/// hold the event, and a copy of a struct of its four references (topic, key, value, headers) retained and released
/// each of them, three copies per event; a copy of the object is one retain (docs/benchmarks.md, "Fewer copies of the
/// event, and what is left to try"). Its properties are constants, so sharing it is the same as copying it.
/// ``SourceCoordinates``' are constants too: this toolchain compiles an explicit initialiser of a struct with `var`
/// properties, returned in memory, into a copy of the new value and the destruction of the original
/// (docs/architecture.md, "The parts and their boundaries").
package final class SourceEvent: Sendable {
    /// Where it came from; `key` is the event's key.
    package let source: SourceCoordinates
    /// The value bytes; `nil` for a tombstone.
    package let value: [UInt8]?
    /// The headers, in order; a name may repeat; a `nil` value is a null header (not an empty one).
    package let headers: [(String, [UInt8]?)]
    /// The broker timestamp in milliseconds since the epoch, when known.
    package let timestampMilliseconds: Int64?
    /// The assignment of its partition it was fetched under (the pipeline's `RebalanceListener` counts them);
    /// the mapper does not use it.
    package let assignmentGeneration: UInt64

    /// Creates an event.
    package init(
        source: SourceCoordinates, value: [UInt8]?, headers: [(String, [UInt8]?)], timestampMilliseconds: Int64?,
        assignmentGeneration: UInt64 = 0
    ) {
        self.source = source
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
        self.assignmentGeneration = assignmentGeneration
    }

    /// The bytes the event holds in memory: value, key and headers.
    package var byteCount: Int {
        var count = (self.value?.count ?? 0) + (self.source.key?.count ?? 0) + self.source.topic.utf8.count
        for (name, value) in self.headers {
            count += name.utf8.count + (value?.count ?? 0)
        }
        return count
    }
}

extension SourceEvent {
    /// An event at `topic`/`partition`/`offset` (for tools and tests that make events by hand).
    package convenience init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]? = nil, timestampMilliseconds: Int64? = nil,
        headers: [(String, [UInt8]?)] = [], value: [UInt8]?
    ) {
        self.init(
            source: SourceCoordinates(topic: topic, partition: partition, offset: offset, key: key), value: value,
            headers: headers, timestampMilliseconds: timestampMilliseconds)
    }
}
