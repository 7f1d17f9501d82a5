import Dispatch
import Foundation
import Logging
import Synchronization
import Waiting

/// Hears partition assignment changes of a ``KafkaConsumer``. Both methods run while the poll thread waits
/// for them (at most ``KafkaConsumerConfiguration/rebalanceListenerTimeout``), so the rebalance completes only
/// after they return.
package protocol KafkaRebalanceListener: Sendable {
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
/// ``batches``. Offsets are committed only once stored with ``storeOffsets(_:)``: librdkafka commits stored
/// offsets in the background every `commitInterval` (while the group is stable), and synchronously when partitions
/// are revoked and when the consumer closes. Every commit's failure is logged once (`Committing offsets failed`).
/// ``run()`` runs the poll thread and the listener; call ``close()`` when done.
package final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let context: ConsumerContext
    /// Its blocking calls (commits, offset and watermark queries): on threads of its own.
    private let calls = BlockingCalls(name: "kafka-cons-call")
    /// ``KafkaConsumerConfiguration/wakesFetchersOnResume``.
    private let wakesFetchersOnResume: Bool
    /// The consumed messages, in batches. Iterate from one task.
    package let batches: KafkaMessageBatches
    /// What ``run()`` runs on the poll thread.
    private let loop: PollLoop

    /// Subscribes to `topics` in `configuration.groupID`; ``run()`` joins and fetches.
    /// Throws a ``KafkaError`` naming the property when librdkafka rejects the configuration.
    package convenience init(
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
    package convenience init(
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
            .consumer,
            properties: configuration.librdkafkaProperties,
            callbacks: RDKafkaCallbacks(
                logger: logger, rebalance: { context.rebalance($0, $1, $2) },
                offsetCommit: { context.committed($0) })
        )
        // Everything (rebalances, errors, messages) is served from the consumer queue by the poll thread.
        client.pollFromConsumerQueue()
        do {
            switch start {
            case .subscribe(let topics): try client.subscribe(topics)
            case .assign(let partitions): try client.assignFromStart(partitions)
            }
        } catch {
            client.destroy()
            throw error
        }
        self.client = client
        self.context = context
        self.wakesFetchersOnResume = configuration.wakesFetchersOnResume
        self.batches = KafkaMessageBatches(buffer: buffer)
        self.loop = PollLoop(
            client: client,
            context: context,
            maxBatchMessageCount: max(1, configuration.maxBatchMessageCount),
            maxBatchBytes: max(1, configuration.maxBatchBytes),
            pollTimeoutMilliseconds: configuration.pollTimeout.milliseconds
        )
        if listener == nil {
            context.refuseListenerCalls()
        }
    }

    deinit {
        self.context.closeRequested.store(true, ordering: .relaxed)
        // Released without a run: the poll loop still closes and frees the handle (it ends at once).
        if self.context.phase.close() == .idle {
            self.startLoopWithoutListener()
        }
        self.calls.stop()
    }

    /// Fetches on a thread of its own (`kafka-cons-poll`) and serves the rebalance listener in a task of its own,
    /// until ``close()``; returns once the consumer is closed. Nothing starts before: the fetching begins here (the
    /// subscription was made in `init`; the assignment is taken at the first poll). Cancelled, it returns once the
    /// listener's task ended, and the thread goes on until the close; a second call, or one after the close, starts
    /// nothing and waits for the close.
    package func run() async {
        guard self.context.phase.start() else {
            _ = await self.context.closed.waitUntilSet()
            return
        }
        let (context, loop) = (self.context, self.loop)
        await withDiscardingTaskGroup { group in
            if context.listener != nil {
                group.addTask { await context.serveListener() }
            }
            startThread(named: "kafka-cons-poll") { loop.run() }
            _ = await context.closed.waitUntilSet()
        }
    }

    /// The poll loop for a consumer closed or released without running: it closes the handle at once. Nothing
    /// serves the listener then (it was never told of an assignment), so its calls are refused, not waited for.
    private func startLoopWithoutListener() {
        self.context.refuseListenerCalls()
        let loop = self.loop
        startThread(named: "kafka-cons-poll") { loop.run() }
    }

    /// Marks everything of `partition` before `nextOffset` finished: the next commit records `nextOffset`
    /// (pass a message's `offset + 1`). Throws `_STATE` when the partition is no longer assigned.
    package func storeOffset(_ nextOffset: Int64, for partition: KafkaPartition) throws {
        try self.storeOffsets([partition: nextOffset])
    }

    /// ``storeOffset(_:for:)`` for several partitions at once.
    package func storeOffsets(_ nextOffsets: [KafkaPartition: Int64]) throws {
        try self.client.storeOffsets(nextOffsets)
        self.context.recordStored(nextOffsets.lazy.map { ($0.key, $0.value) })
    }

    /// Stops fetching `partitions` until ``resume(_:)``. Batches already buffered are still delivered.
    package func pause(_ partitions: [KafkaPartition]) throws {
        guard !partitions.isEmpty else {
            return
        }
        try self.context.assignmentChange.withLock { _ in
            // A paused partition needs no waking, and a seek would move where it resumes from.
            self.context.forgetWakes(of: partitions)
            try self.client.setPaused(true, partitions)
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
    package func resume(_ partitions: [KafkaPartition]) throws {
        guard !partitions.isEmpty else {
            return
        }
        try self.context.assignmentChange.withLock { _ in
            let positions = self.context.deliveredPositions(of: partitions)
            // Marked first: should resuming fail half-way, the poll thread must not count them as paused.
            self.context.markPaused(partitions, false)
            try self.client.setPaused(
                false, partitions,
                thenSeek: self.wakesFetchersOnResume ? positions.map { ($0.partition, $0.offset) } : [])
            if self.wakesFetchersOnResume {
                self.context.wakeLater(positions)
            }
        }
    }

    /// Fetches `partition` again from `offset`, as a resume's seek does when the broker thread fetched in
    /// between: for tests of the poll thread's duplicate filter.
    func rewind(_ partition: KafkaPartition, to offset: Int64) throws {
        try self.context.assignmentChange.withLock { _ in
            try self.client.seek(to: [(partition, offset)])
        }
    }

    /// The partitions currently assigned to this member.
    package func assignment() throws -> [KafkaPartition] {
        try self.client.assignment()
    }

    /// The watermarks and position of `partitions`, from what the consumer last heard from the brokers
    /// (no network round trip, so it is cheap enough for a metrics scrape). Lag is 0 until the first fetch.
    package func lag(for partitions: [KafkaPartition]) throws -> [KafkaPartitionLag] {
        try self.client.lag(for: partitions)
    }

    /// Asks the partition's leader for its current watermarks (ListOffsets, a network round trip of at most
    /// `timeout`). Where this consumer has fetched the partition, the high watermark is the larger of the
    /// leader's ListOffsets answer and the high watermark of the last fetch response (librdkafka's cache, as
    /// ``lag(for:)`` reads it): a high watermark only grows, and a broker may answer ListOffsets(latest) with a
    /// stale offset — Tansu 0.6.0 answers 1 after five records produced in one batch — while its fetch responses
    /// carry the right one. A correct broker's answer wins over a cache that is old (a paused partition).
    package func queryWatermarks(
        for partition: KafkaPartition,
        timeout: Duration
    ) async throws -> (low: Int64, high: Int64) {
        let client = self.client
        let answer = try await self.calls.run { try client.queryWatermarks(for: partition, timeout: timeout) }
        return (answer.low, max(answer.high, answer.cachedHigh ?? answer.high))
    }

    /// Each partition's high watermark as its leader says it now (one ListOffsets request per leader, at most
    /// `timeout`), for every partition asked, paused or not: ``lag(for:)`` reads librdkafka's cache, which only
    /// fetch responses update, so a paused partition's high watermark stands still there however much is produced
    /// (issue 28: a halted bridge's lag stayed at 73 while 500 events waited). Partitions the query could not answer
    /// are left out. A broker may answer ListOffsets with a stale offset (Tansu 0.6.0), so take the larger of this and
    /// ``lag(for:)``'s cached high watermark, as ``queryWatermarks(for:timeout:)`` does.
    package func latestOffsets(for partitions: [KafkaPartition], timeout: Duration) async throws -> [KafkaPartition:
        Int64]
    {
        guard !partitions.isEmpty else { return [:] }
        let client = self.client
        return try await self.calls.run { try client.latestOffsets(for: partitions, timeout: timeout) }
    }

    /// The group's committed offsets of `partitions` (asked of the group coordinator, at most `timeout`);
    /// partitions without a committed offset are left out.
    package func committedOffsets(
        for partitions: [KafkaPartition],
        timeout: Duration
    ) async throws -> [KafkaPartition: Int64] {
        let client = self.client
        return try await self.calls.run { try client.committedOffsets(for: partitions, timeout: timeout) }
    }

    /// Commits the stored offsets now and waits for the broker's answer, at most `timeout` (then it throws
    /// `_TIMED_OUT`, and librdkafka finishes the commit in the background or fails it). Nothing to commit is not an
    /// error. librdkafka's synchronous commit has no timeout of its own: without a coordinator it waits up to
    /// `socket.timeout.ms` (a minute by default).
    package func commit(timeout: Duration = .seconds(60)) async throws {
        let client = self.client
        try await self.calls.run(timeout: timeout) { try client.commitStoredOffsets() }
    }

    /// Stops fetching, revokes the assignment (the listener runs, stored offsets are committed
    /// synchronously), leaves the group and frees librdkafka's resources. ``batches`` ends. Safe to call more
    /// than once and from several tasks. Returns once the consumer is closed, or after
    /// ``KafkaConsumerConfiguration/closeTimeout`` (e.g. the coordinator is unreachable), leaving librdkafka
    /// to finish in the background.
    package func close() async {
        self.context.closeRequested.store(true, ordering: .relaxed)
        if self.context.phase.close() == .idle {
            self.startLoopWithoutListener()
        }
        // Its threads end once idle; a call made after the close still runs, on a thread of its own.
        defer { self.calls.stop() }
        if await !self.context.closed.waitUntilSet(deadline: .now + self.context.closeTimeout) {
            self.context.logger.warning(
                "Consumer close did not finish in time; librdkafka completes it in the background",
                metadata: ["kafka.timeout_ms": "\(self.context.closeTimeout.milliseconds)"]
            )
            self.context.buffer.finish(.closed)
            return
        }
        // Closed: the listener's last calls (the revocation) returned, or their own timeout let the poll thread go.
        if await !self.context.listenerServed.waitUntilSet(deadline: .now + self.context.listenerTimeout) {
            self.context.logger.warning(
                "A rebalance listener call is still running after the consumer closed",
                metadata: ["kafka.timeout_ms": "\(self.context.listenerTimeout.milliseconds)"])
        }
    }
}

extension KafkaConsumer {
    /// This consumer with ``run()`` started in a task of its own, which ends with the close: for a tool or a test
    /// that makes a consumer, reads from it and closes it. The bridge's source runs its consumer itself.
    package func running() -> KafkaConsumer {
        Task { await self.run() }
        return self
    }
}
