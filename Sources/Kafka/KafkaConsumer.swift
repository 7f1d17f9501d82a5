import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization

/// Hears partition assignment changes of a ``KafkaConsumer``. Both methods run while the poll thread waits
/// for them (at most ``KafkaConsumerConfiguration/rebalanceListenerTimeout``), so the rebalance completes only
/// after they return.
public protocol KafkaRebalanceListener: Sendable {
    /// `partitions` were assigned to this member; their messages follow, each carrying `generation` as its
    /// ``KafkaMessage/assignmentGeneration``. Generations increase with every assignment, so a message of an
    /// older generation was fetched before the partition was revoked (and perhaps assigned back).
    func partitionsAssigned(_ partitions: [KafkaPartition], generation: UInt64) async
    /// `partitions` are being taken away. When this returns, the consumer commits the stored offsets
    /// synchronously and releases the partitions, so finish (and store) or abandon their work first.
    func partitionsRevoked(_ partitions: [KafkaPartition]) async
}

/// A member of a consumer group over librdkafka.
///
/// Messages are fetched on a dedicated poll thread (never Swift's cooperative pool) and delivered through
/// ``batches``. Offsets are committed only once stored with ``storeOffset(_:for:)``: librdkafka commits stored
/// offsets in the background every `commitInterval`, and synchronously when partitions are revoked and when
/// the consumer closes. Call ``close()`` when done.
public final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let context: ConsumerContext

    /// The consumed messages, in batches. Iterate from one task.
    public let batches: KafkaMessageBatches

    /// Joins `configuration.groupID`, subscribes to `topics` and starts fetching on a new thread.
    /// Throws a ``KafkaError`` naming the property when librdkafka rejects the configuration.
    public convenience init(
        configuration: KafkaConsumerConfiguration,
        topics: [String],
        listener: (any KafkaRebalanceListener)? = nil,
        logger: Logger
    ) throws(KafkaError) {
        guard !topics.isEmpty else {
            throw KafkaError(code: .invalidArgument, message: "a consumer needs at least one topic to subscribe to")
        }
        try self.init(configuration: configuration, start: .subscribe(topics), listener: listener, logger: logger)
    }

    /// Reads `partitions` from their first offset without joining `configuration.groupID` (librdkafka's
    /// `rd_kafka_assign` instead of a subscription): no group rebalance, and nothing is committed unless offsets
    /// are stored. For readers that must not disturb a group or wait for a join (tools and tests; a join takes
    /// seconds on most brokers). The group ID still names whose offsets ``committedOffsets(for:timeout:)`` reads.
    /// An empty list reads nothing and serves only such questions.
    public convenience init(
        configuration: KafkaConsumerConfiguration,
        readingFromStart partitions: [KafkaPartition],
        logger: Logger
    ) throws(KafkaError) {
        try self.init(configuration: configuration, start: .assign(partitions), listener: nil, logger: logger)
    }

    /// How a consumer gets its partitions.
    private enum Start {
        /// A group subscription: the group coordinator assigns partitions.
        case subscribe([String])
        /// A fixed assignment, from each partition's first offset.
        case assign([KafkaPartition])
    }

    private init(
        configuration: KafkaConsumerConfiguration,
        start: Start,
        listener: (any KafkaRebalanceListener)?,
        logger: Logger
    ) throws(KafkaError) {
        let buffer = BatchBuffer(capacity: configuration.bufferedBatchCount)
        let context = ConsumerContext(
            buffer: buffer,
            listener: listener,
            listenerTimeout: configuration.rebalanceListenerTimeout,
            closeTimeout: configuration.closeTimeout,
            logger: logger
        )
        let client = try RDKafkaClient.make(
            RD_KAFKA_CONSUMER,
            properties: configuration.librdkafkaProperties,
            callbacks: RDKafkaCallbacks(logger: logger, rebalance: { context.rebalance($0, $1, $2) })
        )
        // Everything (rebalances, errors, messages) is served from the consumer queue by the poll thread.
        rd_kafka_poll_set_consumer(client.pointer)
        switch start {
        case .subscribe(let topics):
            let subscription = RDKafkaPartitionList(capacity: topics.count)
            for topic in topics {
                subscription.add(KafkaPartition(topic: topic, partition: RD_KAFKA_PARTITION_UA), offset: nil)
            }
            let error = rd_kafka_subscribe(client.pointer, subscription.pointer)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                client.destroy()
                throw KafkaError(error, context: "subscribing to \(topics.joined(separator: ", "))")
            }
        case .assign(let partitions):
            let assignment = RDKafkaPartitionList(capacity: partitions.count)
            for partition in partitions {
                assignment.add(partition, offset: Int64(RD_KAFKA_OFFSET_BEGINNING))
            }
            let error = rd_kafka_assign(client.pointer, assignment.pointer)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                client.destroy()
                throw KafkaError(error, context: "assigning \(partitions.map(\.description).joined(separator: ", "))")
            }
        }
        self.client = client
        self.context = context
        self.batches = KafkaMessageBatches(buffer: buffer)
        let loop = PollLoop(
            client: client,
            context: context,
            maxBatchMessageCount: max(1, configuration.maxBatchMessageCount),
            maxBatchBytes: max(1, configuration.maxBatchBytes),
            pollTimeoutMilliseconds: configuration.pollTimeout.milliseconds
        )
        startThread(named: "kafka-cons-poll") { loop.run() }
    }

    deinit {
        self.context.closeRequested.store(true, ordering: .relaxed)
    }

    /// Marks everything of `partition` before `nextOffset` finished: the next commit records `nextOffset`
    /// (pass a message's `offset + 1`). Throws `_STATE` when the partition is no longer assigned.
    public func storeOffset(_ nextOffset: Int64, for partition: KafkaPartition) throws {
        try self.storeOffsets([partition: nextOffset])
    }

    /// ``storeOffset(_:for:)`` for several partitions at once.
    public func storeOffsets(_ nextOffsets: [KafkaPartition: Int64]) throws {
        let list = RDKafkaPartitionList(capacity: nextOffsets.count)
        for (partition, offset) in nextOffsets {
            list.add(partition, offset: offset)
        }
        try self.client.withHandle { handle in
            let error = rd_kafka_offsets_store(handle, list.pointer)
            if let partitionError = list.firstError(context: "storing the offset of") {
                throw partitionError
            }
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(error, context: "storing offsets")
            }
        }
    }

    /// Stops fetching `partitions` until ``resume(_:)``. Batches already buffered are still delivered.
    public func pause(_ partitions: [KafkaPartition]) throws {
        guard !partitions.isEmpty else {
            return
        }
        let list = RDKafkaPartitionList(partitions)
        try self.context.assignmentChange.withLock { _ in
            // A paused partition needs no waking, and a seek would move where it resumes from.
            self.context.forgetWakes(of: partitions)
            try self.client.withHandle { handle in try Self.setPaused(true, list, handle) }
            self.context.markPaused(partitions, true)
        }
    }

    /// Fetches `partitions` again, from the first message not yet delivered, at once.
    ///
    /// librdkafka 2.0.2 only clears a resumed partition's pause flag. The broker thread that fetches it sleeps up
    /// to a second while it has nothing to fetch, and nothing wakes it, so on its own a resumed partition was
    /// fetched again 0–1 s later: a pipeline that paused whenever its line was full stood idle for half a second
    /// on average at every resume (docs/kafka.md, "Resuming wakes the fetcher"). A seek wakes the broker thread, so
    /// each resumed partition that has delivered messages in this assignment is also sought to the offset after
    /// the last one delivered, which is where resuming fetches from anyway.
    ///
    /// The broker thread decides at that wake-up, and it fetches nothing while librdkafka's local queue is over
    /// `queued.max.messages.kbytes`. Pausing does not always empty that queue (librdkafka drops a paused
    /// partition's prefetched messages only from the front of the consumer queue, the rest as the poll thread
    /// reaches them), so the poll thread seeks once more when it next finds the queue empty
    /// (``ConsumerContext/wakeFetchers(_:)``).
    ///
    /// The broker thread may fetch between the resume and a seek, and the poll thread take some of those
    /// messages; the seek then fetches them once more, and the poll thread drops what it already delivered in this
    /// assignment (``ConsumerContext/admit(_:offset:)``).
    ///
    /// Everything happens under the lock the rebalance callback holds to assign or release partitions, and a seek
    /// goes only to a partition still in the assignment its position was read from, so it can never move a new
    /// assignment off its committed offset.
    public func resume(_ partitions: [KafkaPartition]) throws {
        guard !partitions.isEmpty else {
            return
        }
        let list = RDKafkaPartitionList(partitions)
        try self.context.assignmentChange.withLock { _ in
            let positions = self.context.deliveredPositions(of: partitions)
            // Marked first: should resuming fail half-way, the poll thread must not count them as paused.
            self.context.markPaused(partitions, false)
            try self.client.withHandle { handle in
                try Self.setPaused(false, list, handle)
                seekWithoutWaiting(handle, to: positions.map { ($0.partition, $0.offset) })
            }
            self.context.wakeLater(positions)
        }
    }

    /// Sets or clears the application's pause flag of `list`'s partitions; throws the call's error, else the first
    /// partition's.
    private static func setPaused(_ paused: Bool, _ list: RDKafkaPartitionList, _ handle: OpaquePointer) throws {
        let error =
            paused ? rd_kafka_pause_partitions(handle, list.pointer) : rd_kafka_resume_partitions(handle, list.pointer)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(error, context: paused ? "pausing partitions" : "resuming partitions")
        }
        if let partitionError = list.firstError(context: paused ? "pausing" : "resuming") {
            throw partitionError
        }
    }

    /// Fetches `partition` again from `offset`, as a resume's seek does when the broker thread fetched in
    /// between: for tests of the poll thread's duplicate filter.
    func rewind(_ partition: KafkaPartition, to offset: Int64) throws {
        try self.context.assignmentChange.withLock { _ in
            try self.client.withHandle { handle in seekWithoutWaiting(handle, to: [(partition, offset)]) }
        }
    }

    /// The partitions currently assigned to this member.
    public func assignment() throws -> [KafkaPartition] {
        try self.client.withHandle { handle in
            var assigned: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let error = rd_kafka_assignment(handle, &assigned)
            // The list librdkafka returns is ours to free, also when there is an error.
            let list = assigned.map(RDKafkaPartitionList.init(adopting:))
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "reading the assignment")
            }
            return list?.elements.map(\.partition) ?? []
        }
    }

    /// The watermarks and position of `partitions`, from what the consumer last heard from the brokers
    /// (no network round trip, so it is cheap enough for a metrics scrape). Lag is 0 until the first fetch.
    public func lag(for partitions: [KafkaPartition]) throws -> [KafkaPartitionLag] {
        let positions = RDKafkaPartitionList(partitions)
        return try self.client.withHandle { handle in
            let error = rd_kafka_position(handle, positions.pointer)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "reading positions")
            }
            return positions.elements.map { element in
                var low: Int64 = -1
                var high: Int64 = -1
                _ = rd_kafka_get_watermark_offsets(
                    handle, element.partition.topic, element.partition.partition, &low, &high)
                return KafkaPartitionLag(
                    partition: element.partition,
                    lowWatermark: max(0, low),
                    highWatermark: max(0, high),
                    position: element.offset >= 0 ? element.offset : nil
                )
            }
        }
    }

    /// Asks the partition's leader for its current watermarks (ListOffsets, a network round trip of at most
    /// `timeout`). Where this consumer has fetched the partition, the high watermark is the larger of the
    /// leader's ListOffsets answer and the high watermark of the last fetch response (librdkafka's cache, as
    /// ``lag(for:)`` reads it): a high watermark only grows, and a broker may answer ListOffsets(latest) with a
    /// stale offset — Tansu 0.6.0 answers 1 after five records produced in one batch — while its fetch responses
    /// carry the right one. A correct broker's answer wins over a cache that is old (a paused partition).
    public func queryWatermarks(
        for partition: KafkaPartition,
        timeout: Duration
    ) async throws -> (low: Int64, high: Int64) {
        let client = self.client
        return try await runOnDedicatedThread(name: "kafka-watermark") {
            try client.withHandle { handle in
                var low: Int64 = -1
                var high: Int64 = -1
                let error = rd_kafka_query_watermark_offsets(
                    handle, partition.topic, partition.partition, &low, &high, timeout.milliseconds)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    throw KafkaError(error, context: "querying the watermarks of \(partition)")
                }
                var cachedLow: Int64 = -1
                var fetchedHigh: Int64 = -1
                let cached = rd_kafka_get_watermark_offsets(
                    handle, partition.topic, partition.partition, &cachedLow, &fetchedHigh)
                if cached == RD_KAFKA_RESP_ERR_NO_ERROR {
                    high = max(high, fetchedHigh)
                }
                return (low, high)
            }
        }
    }

    /// The group's committed offsets of `partitions` (asked of the group coordinator, at most `timeout`);
    /// partitions without a committed offset are left out.
    public func committedOffsets(
        for partitions: [KafkaPartition],
        timeout: Duration
    ) async throws -> [KafkaPartition: Int64] {
        let client = self.client
        return try await runOnDedicatedThread(name: "kafka-committed") {
            let list = RDKafkaPartitionList(partitions)
            return try client.withHandle { handle in
                let error = rd_kafka_committed(handle, list.pointer, timeout.milliseconds)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    throw KafkaError(error, context: "reading committed offsets")
                }
                var result: [KafkaPartition: Int64] = [:]
                for element in list.elements where element.offset >= 0 {
                    result[element.partition] = element.offset
                }
                return result
            }
        }
    }

    /// Commits the stored offsets now and waits for the broker's answer. Nothing to commit is not an error.
    public func commit() async throws {
        let client = self.client
        try await runOnDedicatedThread(name: "kafka-commit") {
            try client.withHandle { handle in
                let error = rd_kafka_commit(handle, nil, 0)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__NO_OFFSET else {
                    throw KafkaError(error, context: "committing offsets")
                }
            }
        }
    }

    /// Stops fetching, revokes the assignment (the listener runs, stored offsets are committed
    /// synchronously), leaves the group and frees librdkafka's resources. ``batches`` ends. Safe to call more
    /// than once and from several tasks. Returns once the consumer is closed, or after
    /// ``KafkaConsumerConfiguration/closeTimeout`` (e.g. the coordinator is unreachable), leaving librdkafka
    /// to finish in the background.
    public func close() async {
        self.context.closeRequested.store(true, ordering: .relaxed)
        if await !self.context.closed.waitUntilClosed(timeout: self.context.closeTimeout) {
            self.context.logger.warning(
                "Consumer close did not finish in time; librdkafka completes it in the background",
                metadata: ["kafka.timeout_ms": "\(self.context.closeTimeout.milliseconds)"]
            )
            self.context.buffer.finish(.closed)
        }
    }
}

/// The consumer's state shared by its poll thread, its rebalance callback and its public API.
final class ConsumerContext: Sendable {
    let buffer: BatchBuffer
    let listener: (any KafkaRebalanceListener)?
    let listenerTimeout: Duration
    let closeTimeout: Duration
    let logger: Logger
    let closeRequested = Atomic<Bool>(false)
    let closed = CloseSignal()
    /// Each assigned partition's current assignment, and the last generation handed out. Written by the
    /// rebalance callback and read by the poll loop, both on the poll thread, so a message is stamped with the
    /// assignment it was fetched under.
    let assignments = Mutex<(last: UInt64, byPartition: [KafkaPartition: Assignment])>((0, [:]))

    /// A partition's current assignment, as the poll thread sees it.
    struct Assignment {
        /// Stamped on its messages (``KafkaMessage/assignmentGeneration``).
        var generation: UInt64
        /// The offset after the last message delivered in this assignment; `nil` before the first.
        var nextOffset: Int64?
        /// Whether ``KafkaConsumer/pause(_:)`` paused it (and no resume followed) in this assignment.
        var paused = false
    }
    /// Held while partitions are assigned or released, and while ``KafkaConsumer/pause(_:)``,
    /// ``KafkaConsumer/resume(_:)`` and ``wakeFetchers(_:)`` seek or change what is to be sought.
    let assignmentChange = Mutex(())
    /// Resumed partitions to seek once more when the poll thread finds librdkafka's queue empty, each with its
    /// assignment generation at the resume (see ``KafkaConsumer/resume(_:)``).
    private let pendingWakes = Mutex<[KafkaPartition: UInt64]>([:])
    /// Whether ``pendingWakes`` has any: read by the poll thread after every empty poll.
    private let hasPendingWakes = Atomic<Bool>(false)

    /// Whether a resume waits for ``wakeFetchers(_:)``.
    var wakesPending: Bool { self.hasPendingWakes.load(ordering: .acquiring) }

    init(
        buffer: BatchBuffer,
        listener: (any KafkaRebalanceListener)?,
        listenerTimeout: Duration,
        closeTimeout: Duration,
        logger: Logger
    ) {
        self.buffer = buffer
        self.listener = listener
        self.listenerTimeout = listenerTimeout
        self.closeTimeout = closeTimeout
        self.logger = logger
    }

    /// The generation to stamp on the message of `partition` at `offset`, or `nil` when this assignment already
    /// delivered it: a resume's seek fetched it again (see ``KafkaConsumer/resume(_:)``). Offsets name messages
    /// for good, so within one assignment a message at or below the last delivered offset is always one delivered
    /// before. A partition without a group assignment (a reader of fixed partitions) is stamped 0, unfiltered.
    func admit(_ partition: KafkaPartition, offset: Int64) -> UInt64? {
        self.assignments.withLock { assignments -> UInt64? in
            guard let index = assignments.byPartition.index(forKey: partition) else {
                return 0
            }
            if let next = assignments.byPartition.values[index].nextOffset, offset < next {
                return nil
            }
            // A broker can claim any offset; the last one possible has no successor, so it stays the bound.
            assignments.byPartition.values[index].nextOffset = offset == .max ? .max : offset + 1
            return assignments.byPartition.values[index].generation
        }
    }

    /// For each of `partitions` that delivered a message in its current assignment: the offset after the last
    /// one, and the assignment's generation. This is where a resume fetches from, tracked here rather than read
    /// from librdkafka (`rd_kafka_position` forgets the position after a seek, until the next message).
    func deliveredPositions(
        of partitions: [KafkaPartition]
    ) -> [(partition: KafkaPartition, offset: Int64, generation: UInt64)] {
        self.assignments.withLock { assignments in
            partitions.compactMap { partition in
                guard let assignment = assignments.byPartition[partition], let next = assignment.nextOffset else {
                    return nil
                }
                return (partition, next, assignment.generation)
            }
        }
    }

    /// Records whether `partitions` of the current assignment are paused. Call with ``assignmentChange`` held.
    func markPaused(_ partitions: [KafkaPartition], _ paused: Bool) {
        self.assignments.withLock { assignments in
            for partition in partitions where assignments.byPartition[partition] != nil {
                assignments.byPartition[partition]?.paused = paused
            }
        }
    }

    /// Whether the group assigned partitions and every one of them is paused: a poll then returns no message of
    /// theirs (librdkafka discards what it fetched before the pause) and only serves rebalances and errors.
    var everyAssignedPartitionPaused: Bool {
        self.assignments.withLock { assignments in
            !assignments.byPartition.isEmpty && assignments.byPartition.values.allSatisfy(\.paused)
        }
    }

    /// Remembers resumed partitions for ``wakeFetchers(_:)``. Call with ``assignmentChange`` held.
    func wakeLater(_ positions: [(partition: KafkaPartition, offset: Int64, generation: UInt64)]) {
        guard !positions.isEmpty else {
            return
        }
        self.pendingWakes.withLock { wakes in
            for position in positions {
                wakes[position.partition] = position.generation
            }
        }
        self.hasPendingWakes.store(true, ordering: .releasing)
    }

    /// Forgets pending wakes of `partitions`, which are paused again. Call with ``assignmentChange`` held.
    func forgetWakes(of partitions: [KafkaPartition]) {
        guard self.wakesPending else {
            return
        }
        self.pendingWakes.withLock { wakes in
            for partition in partitions { wakes[partition] = nil }
            if wakes.isEmpty { self.hasPendingWakes.store(false, ordering: .releasing) }
        }
    }

    /// Seeks the partitions resumed since the last call once more, to the offset after the last message
    /// delivered, so that their broker thread decides again now that librdkafka's queue is empty. The poll thread calls it after every poll that returned nothing; without a
    /// resume pending it returns at once, taking no lock. A partition revoked since its resume (its assignment
    /// generation changed) is left alone.
    func wakeFetchers(_ handle: OpaquePointer) {
        guard self.wakesPending else {
            return
        }
        self.assignmentChange.withLock { _ in
            let wakes = self.pendingWakes.withLock { wakes in
                defer {
                    wakes.removeAll()
                    self.hasPendingWakes.store(false, ordering: .releasing)
                }
                return wakes
            }
            let seeks = self.assignments.withLock { assignments in
                // Only partitions that had delivered a message were resumed with a wake; the offset stays set
                // for as long as the generation does.
                wakes.compactMap { partition, generation -> (KafkaPartition, Int64)? in
                    guard let assignment = assignments.byPartition[partition], assignment.generation == generation,
                        let next = assignment.nextOffset
                    else {
                        return nil
                    }
                    return (partition, next)
                }
            }
            seekWithoutWaiting(handle, to: seeks)
        }
    }

    /// Runs a listener method from the poll thread and blocks it until the method returns or the timeout.
    func awaitListener(_ event: String, _ body: @escaping @Sendable (any KafkaRebalanceListener) async -> Void) {
        guard let listener = self.listener else {
            return
        }
        let done = DispatchSemaphore(value: 0)
        // The poll thread is not part of Swift concurrency, so the listener runs in a task of its own while
        // the thread waits; that is the point of the bound: a stuck listener cannot stall the group forever.
        Task {
            await body(listener)
            done.signal()
        }
        let timeoutMilliseconds = Int(self.listenerTimeout.milliseconds)
        if done.wait(timeout: .now() + .milliseconds(timeoutMilliseconds)) == .timedOut {
            self.logger.warning(
                "Rebalance listener did not return in time; completing the rebalance",
                metadata: ["kafka.rebalance": "\(event)", "kafka.timeout_ms": "\(timeoutMilliseconds)"]
            )
        }
    }

    /// Serves one rebalance event on the poll thread (inside `rd_kafka_consumer_poll` or `_close`).
    func rebalance(
        _ handle: OpaquePointer,
        _ event: rd_kafka_resp_err_t,
        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
    ) {
        let partitions = list.map { RDKafkaPartitionList.elements(of: $0).map(\.partition) } ?? []
        let cooperative = rd_kafka_rebalance_protocol(handle).map { String(cString: $0) } == "COOPERATIVE"
        switch event {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            self.logger.info(
                "Partitions assigned",
                metadata: ["kafka.partitions": "\(partitions.map(\.description).joined(separator: ","))"]
            )
            let generation = self.assignments.withLock { assignments in
                assignments.last += 1
                for partition in partitions {
                    assignments.byPartition[partition] = Assignment(generation: assignments.last, nextOffset: nil)
                }
                return assignments.last
            }
            self.complete(handle, list, assign: true, cooperative: cooperative)
            self.awaitListener("assign") { await $0.partitionsAssigned(partitions, generation: generation) }
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(handle) != 0
            self.logger.info(
                "Partitions revoked",
                metadata: [
                    "kafka.partitions": "\(partitions.map(\.description).joined(separator: ","))",
                    "kafka.lost": "\(lost)",
                ]
            )
            self.buffer.discard(Set(partitions))
            self.assignments.withLock { assignments in
                for partition in partitions { assignments.byPartition[partition] = nil }
            }
            self.awaitListener("revoke") { await $0.partitionsRevoked(partitions) }
            if !lost {
                // Synchronous: the next owner must see every offset stored for these partitions.
                let error = rd_kafka_commit(handle, nil, 0)
                if error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET {
                    // At-least-once still holds: the next owner re-reads from the last successful commit.
                    self.logger.warning(
                        "Could not commit offsets of revoked partitions",
                        metadata: ["kafka.error": "\(KafkaError(error))"]
                    )
                }
            }
            self.complete(handle, list, assign: false, cooperative: cooperative)
        default:
            self.logger.error("Rebalance failed", metadata: ["kafka.error": "\(KafkaError(event))"])
            self.complete(handle, nil, assign: false, cooperative: false)
        }
    }

    /// Takes the partitions on (`assign`) or releases them, the way the group's rebalance protocol wants.
    private func complete(
        _ handle: OpaquePointer,
        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
        assign: Bool,
        cooperative: Bool
    ) {
        let failure: KafkaError? = self.assignmentChange.withLock { _ in
            self.assignOrRelease(handle, list, assign: assign, cooperative: cooperative)
        }
        if let failure {
            self.logger.error(
                assign ? "Could not assign partitions" : "Could not release partitions",
                metadata: ["kafka.error": "\(failure)"]
            )
        }
    }

    private func assignOrRelease(
        _ handle: OpaquePointer,
        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
        assign: Bool,
        cooperative: Bool
    ) -> KafkaError? {
        let failure: KafkaError?
        if cooperative {
            let error = assign ? rd_kafka_incremental_assign(handle, list) : rd_kafka_incremental_unassign(handle, list)
            failure = error.map { KafkaError(consuming: $0) }
        } else {
            let error = rd_kafka_assign(handle, assign ? list : nil)
            failure = error == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(error)
        }
        return failure
    }
}

/// The poll thread's work: fetch into batches while there is room, then close and destroy the handle.
private struct PollLoop: Sendable {
    let client: RDKafkaClient
    let context: ConsumerContext
    let maxBatchMessageCount: Int
    let maxBatchBytes: Int
    let pollTimeoutMilliseconds: Int32

    func run() {
        let handle = self.client.pointer
        var topicNames = TopicNameCache()
        var failure: KafkaError?
        // What a poll returned while the buffer was full (one message at most): handed over first, once it fits.
        var held = Collected()
        let shouldStop = { self.context.closeRequested.load(ordering: .relaxed) }
        // librdkafka takes the partitions of a member that does not poll for `max.poll.interval.ms`, and the poll
        // thread does not poll while the buffer is full: a reader that stops for long (a pipeline whose line is
        // halted and full) would cost the group a rebalance, and the member its partitions. While every assigned
        // partition is paused a poll returns none of their messages, only rebalances and errors, so the thread
        // polls then, every 100 ms of the wait. A message that comes anyway (a resume in between) is held, and
        // the thread stops polling until there is room.
        let keepMembership = {
            guard held.messages.isEmpty, failure == nil, self.context.everyAssignedPartitionPaused,
                let message = rd_kafka_consumer_poll(handle, 0)
            else {
                return
            }
            failure = self.collect(message, into: &held, topicNames: &topicNames)
        }
        while !shouldStop(), failure == nil,
            self.context.buffer.waitForSpace(shouldStop: shouldStop, whileWaiting: keepMembership)
        {
            if !held.messages.isEmpty || held.redelivered > 0 {
                self.hand(&held)
                continue
            }
            // Wait for the first message, then take what is already there without waiting. After a resume, only
            // look: an empty queue is the moment to wake the fetchers again.
            var next = rd_kafka_consumer_poll(
                handle, self.context.wakesPending ? 0 : self.pollTimeoutMilliseconds)
            guard next != nil else {
                self.context.wakeFetchers(handle)
                continue
            }
            var collected = Collected()
            collected.messages.reserveCapacity(self.maxBatchMessageCount)
            while let message = next {
                // Looked up per message: the polls below may serve a rebalance in the middle of a batch.
                failure = self.collect(message, into: &collected, topicNames: &topicNames)
                if failure != nil || collected.messages.count >= self.maxBatchMessageCount
                    || collected.bytes >= self.maxBatchBytes
                {
                    break
                }
                next = rd_kafka_consumer_poll(handle, 0)
                if next == nil {
                    self.context.wakeFetchers(handle)
                }
            }
            self.hand(&collected)
        }
        // Revokes the assignment through the rebalance callback (listener, synchronous commit), then leaves.
        let closeError = rd_kafka_consumer_close(handle)
        if closeError != RD_KAFKA_RESP_ERR_NO_ERROR {
            self.context.logger.warning(
                "Consumer close reported an error",
                metadata: [
                    "kafka.error": "\(KafkaError(closeError))"
                ])
        }
        self.client.destroy()
        self.context.buffer.finish(failure.map(BatchBuffer.End.failed) ?? .closed)
        self.context.closed.markClosed()
    }

    /// Messages taken from librdkafka for one batch.
    private struct Collected {
        var messages: [KafkaMessage] = []
        /// Their keys', values' and headers' bytes.
        var bytes = 0
        /// Messages dropped as already delivered in their assignment (see ``ConsumerContext/admit(_:offset:)``).
        var redelivered = 0
    }

    /// Copies `message` into `collected`, stamped with its assignment generation, unless its assignment delivered
    /// it already; destroys it. Returns the fatal error an error event carries.
    private func collect(
        _ message: UnsafeMutablePointer<rd_kafka_message_t>,
        into collected: inout Collected,
        topicNames: inout TopicNameCache
    ) -> KafkaError? {
        defer { rd_kafka_message_destroy(message) }
        guard message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return self.report(message)
        }
        let topic = topicNames.name(of: message.pointee.rkt)
        guard
            let generation = self.context.admit(
                KafkaPartition(topic: topic, partition: message.pointee.partition), offset: message.pointee.offset)
        else {
            collected.redelivered += 1
            return nil
        }
        var copy = Self.copy(message, topic: topic)
        copy.assignmentGeneration = generation
        collected.bytes += copy.byteCount
        collected.messages.append(copy)
        return nil
    }

    /// Pushes what was collected into the buffer (which has room) and starts over.
    private func hand(_ collected: inout Collected) {
        if collected.redelivered > 0 {
            self.context.logger.debug(
                "Messages fetched again after a resume dropped",
                metadata: ["kafka.messages": "\(collected.redelivered)"])
        }
        if !collected.messages.isEmpty {
            self.context.buffer.push(collected.messages)
        }
        collected = Collected()
    }

    /// Logs a consumer error event; returns the fatal error that ends consumption, if it is one.
    private func report(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> KafkaError? {
        let code = message.pointee.err
        if code == RD_KAFKA_RESP_ERR__PARTITION_EOF {
            return nil
        }
        if code == RD_KAFKA_RESP_ERR__FATAL {
            let error = self.client.fatalError() ?? KafkaError(code)
            self.context.logger.error("Consumer failed", metadata: ["kafka.error": "\(error)"])
            return error
        }
        let text = rd_kafka_message_errstr(message).map { String(cString: $0) } ?? ""
        self.context.logger.warning(
            "Consumer error",
            metadata: ["kafka.error": "\(KafkaError.Code(code).name)", "kafka.reason": "\(text)"]
        )
        return nil
    }

    private static func copy(_ message: UnsafeMutablePointer<rd_kafka_message_t>, topic: String) -> KafkaMessage {
        let fields = message.pointee
        let value = fields.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: fields.len)) }
        let key = fields.key.map { Array(UnsafeRawBufferPointer(start: $0, count: fields.key_len)) }
        var headers: [KafkaHeader] = []
        var list: OpaquePointer?
        if rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list {
            var index = 0
            var name: UnsafePointer<CChar>?
            var headerValue: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(list, index, &name, &headerValue, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                headers.append(
                    KafkaHeader(
                        name: name.map { String(cString: $0) } ?? "",
                        value: headerValue.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }
                    )
                )
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaMessage(
            topic: topic,
            partition: fields.partition,
            offset: fields.offset,
            key: key,
            value: value,
            headers: headers,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil
        )
    }
}

/// Remembers the Swift name of the last topic handle seen, so a batch from one topic makes one `String`.
private struct TopicNameCache {
    private var cachedName = ""
    private var cachedC: [CChar] = [0]

    mutating func name(of topic: OpaquePointer?) -> String {
        guard let topic, let cName = rd_kafka_topic_name(topic) else {
            return ""
        }
        if strcmp(cName, self.cachedC) != 0 {
            self.cachedName = String(cString: cName)
            self.cachedC = Array(self.cachedName.utf8CString)
        }
        return self.cachedName
    }
}

/// Seeks `positions` without waiting (librdkafka's asynchronous seek: per-partition errors are not reported). A
/// seek wakes the partition's broker thread, which a resume does not (see ``KafkaConsumer/resume(_:)``).
func seekWithoutWaiting(_ handle: OpaquePointer, to positions: [(KafkaPartition, Int64)]) {
    guard !positions.isEmpty else {
        return
    }
    let list = RDKafkaPartitionList(capacity: positions.count)
    for (partition, offset) in positions {
        list.add(partition, offset: offset)
    }
    if let error = rd_kafka_seek_partitions(handle, list.pointer, 0) {
        rd_kafka_error_destroy(error)
    }
}
