import BridgeCore
import Kafka
import Logging
import Routing
import Synchronization

/// The pipeline's event source on a Kafka consumer group (docs/operations.md, "Guarantees"): one ``KafkaConsumer`` subscribed to every
/// input topic. Finished offsets are stored with librdkafka by ``commit()`` (every `kafka.commit_interval`), and
/// librdkafka's background commit sends them every `kafka.commit_interval` too, but only while the group is stable;
/// on revocation and on close they are committed synchronously.
///
/// The periodic commit is librdkafka's own because it knows the group's state and this code does not: a commit sent
/// while the member rejoins a cooperative rebalance carries the old generation, is answered `ILLEGAL_GENERATION`,
/// and librdkafka 2.0.2 then forgets its generation and loses its whole assignment (librdkafka issue #4059; docs/kafka.md,
/// "Commits during a rebalance"). Synchronous periodic commits did exactly that at every membership change.
///
/// Finished offsets are kept here and handed to librdkafka once per interval and before each synchronous commit:
/// storing each one as it finished cost a partition list and several allocations per event. Positions are handed
/// over in order (inside the pipeline's partition lock), so no store goes backwards and a background commit carries
/// offsets no older than the previous one.
package final class KafkaEventSource: EventSource {
    private let configuration: KafkaConsumerConfiguration
    private let topics: [String]
    private let logger: Logger
    private let consumer = Mutex<KafkaConsumer?>(nil)
    /// The consumer's ``KafkaConsumer/run()``, from ``start(listener:)`` until ``close()`` joins it.
    private let consumerRun = Mutex<Task<Void, Never>?>(nil)
    /// The longest a commit is waited for (``commit()``, ``close()``); it may still complete in the background.
    private let commitTimeout: Duration
    /// The next offset of each partition finished since the last store, newest wins.
    private let finished = Mutex<[KafkaPartition: Int64]>([:])

    /// Creates a source for `topics`; it joins the group in ``start(listener:)``. A commit is waited for at most
    /// `commitTimeout`: shutdown must end in bounded time while the coordinator is away.
    package init(
        configuration: KafkaConsumerConfiguration, topics: [String], commitTimeout: Duration = .seconds(2),
        logger: Logger
    ) {
        var configuration = configuration
        configuration.automaticCommits = true
        self.configuration = configuration
        self.commitTimeout = commitTimeout
        self.topics = topics
        self.logger = logger
    }

    package func start(listener: any RebalanceListener) async throws -> AsyncThrowingStream<[SourceEvent], any Error> {
        let consumer = try KafkaConsumer(
            configuration: self.configuration,
            topics: self.topics,
            listener: ListenerAdapter(listener: listener, source: self),
            logger: self.logger
        )
        self.consumer.withLock { $0 = consumer }
        self.consumerRun.withLock { $0 = Task { await consumer.run() } }
        let reader = BatchReader(iterator: consumer.batches.makeAsyncIterator())
        // Unfolding keeps the consumer's own bound: the next batch is read only when the pipeline asks.
        return AsyncThrowingStream(unfolding: {
            guard let batch = try await reader.next() else { return nil }
            return batch.map(SourceEvent.init(message:))
        })
    }

    package func markFinished(_ partition: PartitionID, nextOffset: Int64) {
        let partition = KafkaPartition(partition)
        self.finished.withLock { $0[partition] = nextOffset }
    }

    /// Hands the offsets finished since the last call to librdkafka, where the next commit finds them.
    private func storeFinished(_ consumer: KafkaConsumer) {
        let offsets = self.finished.withLock { finished in
            let offsets = finished
            finished.removeAll(keepingCapacity: true)
            return offsets
        }
        guard !offsets.isEmpty else { return }
        do {
            try consumer.storeOffsets(offsets)
        } catch {
            // A partition was revoked meanwhile (the others are stored): its new owner processes these events
            // again.
            self.logger.debug("Offset not stored", error: error)
        }
    }

    package func pause(_ partitions: [PartitionID]) {
        do {
            try self.consumer.withLock { $0 }?.pause(partitions.map(KafkaPartition.init))
        } catch {
            self.logger.warning("Pausing partitions failed", error: error)
        }
    }

    package func resume(_ partitions: [PartitionID]) {
        do {
            try self.consumer.withLock { $0 }?.resume(partitions.map(KafkaPartition.init))
        } catch {
            self.logger.warning("Resuming partitions failed", error: error)
        }
    }

    package func close() async {
        guard let consumer = self.consumer.withLock({ $0 }) else { return }
        await self.commit(consumer)
        await consumer.close()
        // Ended by the close; cancelled too, so that a close that ran out of time (librdkafka finishing it in the
        // background) does not hold the shutdown here.
        let run = self.consumerRun.withLock { $0 }
        run?.cancel()
        await run?.value
    }

    /// The periodic turn: hands the finished offsets to librdkafka, whose background commit sends them while the
    /// group is stable.
    package func commit() async {
        guard let consumer = self.consumer.withLock({ $0 }) else { return }
        self.storeFinished(consumer)
    }

    /// The final commit, synchronous and bounded. A failure is logged by the consumer (`Committing offsets failed`),
    /// unless the wait ran out first.
    private func commit(_ consumer: KafkaConsumer) async {
        self.storeFinished(consumer)
        do {
            try await consumer.commit(timeout: self.commitTimeout)
        } catch let error as KafkaError where error.code == .timedOut {
            self.logger.warning("Committing offsets failed", error: error)
        } catch {
            self.logger.debug("Final commit failed", error: error)
        }
    }

    /// High watermark minus committed offset of every assigned partition, paused or not, as KEDA's Kafka scaler and
    /// Burrow compute it; empty before start. The committed offsets are asked of the group coordinator and the high
    /// watermarks of each partition's leader (ListOffsets), at most 2 s each.
    package func lag() async -> [PartitionLag] {
        await self.lag(timeout: .seconds(2)).map { lag in
            PartitionLag(partition: PartitionID(lag.partition), uncommittedMessageCount: lag.uncommittedMessageCount)
        }
    }

    /// The watermarks, position and committed offset of every assigned partition; empty before start. The
    /// committed offsets are asked of the group coordinator, the high watermarks of the partitions' leaders (at
    /// most `timeout` each); a high watermark the leader did not give is the last fetch response's.
    package func lag(timeout: Duration) async -> [KafkaPartitionLag] {
        guard let consumer = self.consumer.withLock({ $0 }) else { return [] }
        do {
            let assignment = try consumer.assignment()
            guard !assignment.isEmpty else { return [] }
            async let latest = consumer.latestOffsets(for: assignment, timeout: timeout)
            let committed = try await consumer.committedOffsets(for: assignment, timeout: timeout)
            let highs: [KafkaPartition: Int64]
            do {
                highs = try await latest
            } catch {
                self.logger.debug("Latest offsets not read; lag uses the last fetched watermarks", error: error)
                highs = [:]
            }
            return try consumer.lag(for: assignment).map { lag in
                var lag = lag
                lag.committed = committed[lag.partition]
                if let high = highs[lag.partition] { lag.highWatermark = max(lag.highWatermark, high) }
                return lag
            }
        } catch {
            self.logger.debug("Consumer lag not read", error: error)
            return []
        }
    }

    private struct ListenerAdapter: KafkaRebalanceListener {
        let listener: any RebalanceListener
        weak var source: KafkaEventSource?

        func partitionsAssigned(_ partitions: [KafkaPartition], generation: UInt64) async {
            await self.listener.partitionsAssigned(partitions.map(PartitionID.init), generation: generation)
        }

        /// The pipeline finishes what it has of `partitions`; what it finished is stored before the consumer's
        /// synchronous commit of the revoked partitions.
        func partitionsRevoked(_ partitions: [KafkaPartition]) async {
            await self.listener.partitionsRevoked(partitions.map(PartitionID.init))
            if let source = self.source, let consumer = source.consumer.withLock({ $0 }) {
                source.storeFinished(consumer)
            }
        }
    }
}

/// Holds the consumer's batch iterator for the unfolding stream, which calls it from one task at a time
/// (an `AsyncThrowingStream` asks for the next element only after the previous one was consumed).
private final class BatchReader: @unchecked Sendable {
    private var iterator: KafkaMessageBatches.Iterator

    init(iterator: KafkaMessageBatches.Iterator) {
        self.iterator = iterator
    }

    func next() async throws -> [KafkaMessage]? {
        try await self.iterator.next()
    }
}

extension SourceEvent {
    /// The pipeline's view of a consumed Kafka message.
    convenience init(message: KafkaMessage) {
        self.init(
            source: SourceCoordinates(
                topic: message.topic, partition: message.partition, offset: message.offset, key: message.key
            ),
            value: message.value,
            headers: message.headers.map { ($0.name, $0.value) },
            timestampMilliseconds: message.timestampMilliseconds,
            assignmentGeneration: message.assignmentGeneration
        )
    }
}

extension KafkaPartition {
    init(_ partition: PartitionID) {
        self.init(topic: partition.topic, partition: partition.partition)
    }
}

extension PartitionID {
    init(_ partition: KafkaPartition) {
        self.init(topic: partition.topic, partition: partition.partition)
    }
}
