import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization
import Waiting

/// The consumer's state shared by its poll thread, its rebalance callback and its package API.
final class ConsumerContext: Sendable {
    let buffer: BatchBuffer
    let listener: (any KafkaRebalanceListener)?
    let listenerTimeout: Duration
    let closeTimeout: Duration
    let logger: Logger
    let closeRequested = Atomic<Bool>(false)
    /// Whether ``KafkaConsumer/run()`` started the poll thread.
    let phase = Mutex(ClientPhase.idle)
    /// Set once the poll thread closed and destroyed the consumer.
    let closed = AsyncCondition(false)
    /// The listener's calls from the poll thread, for ``serveListener()`` to run; finished once the poll thread
    /// ends.
    let listenerCalls = AsyncStream<@Sendable () async -> Void>.makeStream()
    /// Set once ``serveListener()`` returned: every listener call it started has returned.
    let listenerServed = AsyncCondition(false)
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
    /// The last offset ``KafkaConsumer/storeOffsets(_:)`` stored for each partition in its current assignment
    /// (everything before it is finished), until the partition is revoked. Apart from ``assignments``, whose entry
    /// goes before the revocation's listener, which stores what the pipeline finished while it drained.
    private let storedOffsets = Mutex<[KafkaPartition: Int64]>([:])
    /// Partitions whose assignment was lost (`lost=true`: nothing could be committed), with the offset stored in
    /// it: everything before that offset was finished by this consumer. Kept until the partition is assigned again
    /// (see ``resumeAfterLoss(_:_:)``).
    private let finishedBeforeLoss = Mutex<[KafkaPartition: Int64]>([:])
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
            // A partition not (or no longer) assigned has no entry: optional chaining leaves it out.
            for partition in partitions {
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

    /// Runs the listener's calls from the poll thread, each in a task of its own group (a stuck one does not hold up
    /// the next), until the poll thread ends and every call returned. A child task of ``KafkaConsumer/run()``;
    /// ``KafkaConsumer/close()`` waits for it.
    func serveListener() async {
        await withDiscardingTaskGroup { group in
            for await call in self.listenerCalls.stream {
                group.addTask { await call() }
            }
        }
        self.listenerServed.set()
    }

    /// Nothing serves the listener (there is none, or the consumer closes without having run): its calls are refused
    /// instead of waited for, and it counts as served.
    func refuseListenerCalls() {
        self.listenerCalls.continuation.finish()
        self.listenerServed.set()
    }

    /// Runs a listener method from the poll thread and blocks it until the method returns or the timeout.
    func awaitListener(_ event: String, _ body: @escaping @Sendable (any KafkaRebalanceListener) async -> Void) {
        guard let listener = self.listener else {
            return
        }
        let done = DispatchSemaphore(value: 0)
        // The poll thread is not part of Swift concurrency: the listener runs in a task of ``serveListener()``'s
        // group while the thread waits, and the wait is bounded, so a stuck listener cannot stall the group forever.
        let call: @Sendable () async -> Void = {
            await body(listener)
            done.signal()
        }
        guard case .enqueued = self.listenerCalls.continuation.yield(call) else { return }
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
            // A store that came after its partition's last revocation was read belongs to no assignment.
            self.storedOffsets.withLock { stored in
                for partition in partitions { stored[partition] = nil }
            }
            let resumed = list.map { self.resumeAfterLoss(handle, $0) } ?? []
            self.complete(handle, list, assign: true, cooperative: cooperative)
            if !resumed.isEmpty {
                // Stored at once, so that the next commit records them even before a message arrives.
                let stored = RDKafkaPartitionList(capacity: resumed.count)
                for (partition, offset) in resumed { stored.add(partition, offset: offset) }
                _ = rd_kafka_offsets_store(handle, stored.pointer)
                self.recordStored(resumed)
            }
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
            let stored = self.storedOffsets.withLock { stored in
                partitions.compactMap { partition in stored.removeValue(forKey: partition).map { (partition, $0) } }
            }
            if lost {
                self.finishedBeforeLoss.withLock { finished in
                    for (partition, offset) in stored { finished[partition] = offset }
                }
            } else {
                // Synchronous: the next owner must see every offset stored for these partitions. A failure is
                // logged by ``committed(_:)``; at-least-once still holds: the next owner re-reads from the last
                // successful commit.
                _ = rd_kafka_commit(handle, nil, 0)
            }
            self.complete(handle, list, assign: false, cooperative: cooperative)
        default:
            self.logger.error("Rebalance failed", error: KafkaError(event))
            self.complete(handle, nil, assign: false, cooperative: false)
        }
    }

    /// Records offsets ``KafkaConsumer/storeOffsets(_:)`` stored (librdkafka accepts them only for assigned
    /// partitions).
    func recordStored(_ offsets: some Sequence<(KafkaPartition, Int64)>) {
        self.storedOffsets.withLock { stored in
            for (partition, offset) in offsets { stored[partition] = offset }
        }
    }

    /// Where partitions assigned again after a lost assignment start: at the offset this consumer had finished
    /// before the loss, when that is beyond the group's committed offset. librdkafka 2.0.2 counts an assignment lost
    /// whenever a commit is answered `ILLEGAL_GENERATION` (issue #4059), which a commit queued during a broker outage
    /// meets when the group rebalanced meanwhile. The member rejoins owning nothing, and some of its partitions come
    /// back to it; without this, everything finished on them since the last successful commit was processed again. Everything before the stored offset
    /// was finished here (its outcomes published), and everything before the committed offset by someone, so starting
    /// at the larger of the two repeats nothing and skips nothing that was not finished. Sets the offsets in `list`
    /// (librdkafka starts an assigned partition at an offset given there) and returns them. Asks the coordinator for
    /// the committed offsets (at most 5 s); without an answer the partitions start at the committed offsets, as
    /// always.
    func resumeAfterLoss(
        _ handle: OpaquePointer,
        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) -> [(KafkaPartition, Int64)] {
        let assigned = RDKafkaPartitionList.elements(of: list).map(\.partition)
        let finished = self.finishedBeforeLoss.withLock { finished in
            assigned.compactMap { partition in finished.removeValue(forKey: partition).map { (partition, $0) } }
        }
        guard !finished.isEmpty else {
            return []
        }
        let query = RDKafkaPartitionList(finished.map(\.0))
        let error = rd_kafka_committed(handle, query.pointer, 5000)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            self.logger.warning(
                "Partitions assigned again after a lost assignment start at the committed offsets",
                error: KafkaError(error, context: "reading committed offsets")
            )
            return []
        }
        let committed = Dictionary(
            query.elements.map { ($0.partition, $0.offset) }, uniquingKeysWith: { first, _ in first })
        let resumed = finished.filter { partition, offset in offset > (committed[partition] ?? -1) }
        guard !resumed.isEmpty else {
            return []
        }
        let offsets = Dictionary(resumed, uniquingKeysWith: { first, _ in first })
        let count = Int(list.pointee.cnt)
        for index in 0..<count {
            guard let element = list.pointee.elems?.advanced(by: index), let topic = element.pointee.topic,
                let offset = offsets[
                    KafkaPartition(topic: String(cString: topic), partition: element.pointee.partition)]
            else { continue }
            element.pointee.offset = offset
        }
        self.logger.info(
            "Partitions assigned again after a lost assignment start where this consumer had finished",
            metadata: [
                "kafka.partitions": "\(resumed.map { "\($0.0)@\($0.1)" }.joined(separator: ","))",
                "kafka.committed": "\(resumed.map { "\(committed[$0.0] ?? -1)" }.joined(separator: ","))",
            ]
        )
        return resumed
    }

    /// The result of a commit, background or synchronous (librdkafka's `offset_commit_cb`, on the poll thread): the
    /// one line an operator sees when commits fail (e.g. the coordinator is away, or refuses while the group
    /// rebalances). The next commit carries the same offsets; a crash before it means events are processed again,
    /// never lost.
    func committed(_ error: rd_kafka_resp_err_t) {
        guard error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET else { return }
        self.logger.warning("Committing offsets failed", error: KafkaError(error, context: "committing offsets"))
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
                error: failure
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
