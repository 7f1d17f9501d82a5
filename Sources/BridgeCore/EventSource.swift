import APNSCore
import Routing

/// One partition of an input topic.
package struct PartitionID: Sendable, Hashable, CustomStringConvertible {
    /// The topic.
    package var topic: String
    /// The partition number.
    package var partition: Int32

    /// Creates a partition identifier.
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    package var description: String { "\(self.topic)[\(self.partition)]" }
}

extension SourceEvent {
    /// The partition it came from.
    package var partition: PartitionID {
        PartitionID(topic: self.source.topic, partition: self.source.partition)
    }
}

/// Hears partition assignment changes from an ``EventSource``.
package protocol RebalanceListener: Sendable {
    /// `partitions` were assigned to this instance; their events follow, carrying `generation` as their
    /// ``SourceEvent/assignmentGeneration``. Generations increase with every assignment: an event of an older
    /// generation was fetched before its partition was revoked, and the source delivers it again.
    func partitionsAssigned(_ partitions: [PartitionID], generation: UInt64) async
    /// `partitions` are being taken away. The source completes the revocation (commits and releases them)
    /// only after this returns, so the listener finishes or abandons their in-flight work first.
    func partitionsRevoked(_ partitions: [PartitionID]) async
}

/// Where events come from (Kafka, in production). Another broker plugs in by conforming to this.
package protocol EventSource: Sendable {
    /// Starts consuming. Batches of events arrive in order within each partition; the sequence ends when
    /// the source is closed. Rebalances are reported to `listener`.
    func start(listener: any RebalanceListener) async throws -> AsyncThrowingStream<[SourceEvent], any Error>
    /// Everything of `partition` before `nextOffset` is finished and may be committed. Calls for one partition
    /// come in increasing order, one at a time; the call must be quick and must not block.
    func markFinished(_ partition: PartitionID, nextOffset: Int64)
    /// Stops fetching `partitions` until ``resume(_:)``.
    func pause(_ partitions: [PartitionID])
    /// Fetches `partitions` again.
    func resume(_ partitions: [PartitionID])
    /// Commits what was marked finished so far (every `kafka.commit_interval`). A failed commit is logged, not
    /// thrown: the next one carries the same offsets.
    func commit() async
    /// The messages not yet committed in each assigned partition (`pushbridge_consumer_lag`); empty when the
    /// source cannot tell now.
    func lag() async -> [PartitionLag]
    /// Commits what was marked finished, leaves the group and releases resources. Never hangs.
    func close() async
}

/// One partition's messages not yet committed: its high watermark minus its committed offset.
package struct PartitionLag: Sendable, Hashable {
    /// The partition.
    package var partition: PartitionID
    /// Messages at or after the committed offset (or the first retained one, while nothing is committed).
    package var uncommittedMessageCount: Int64

    /// Creates a lag reading.
    package init(partition: PartitionID, uncommittedMessageCount: Int64) {
        self.partition = partition
        self.uncommittedMessageCount = uncommittedMessageCount
    }
}
