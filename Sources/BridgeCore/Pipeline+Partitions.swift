import Logging
import Routing
import Synchronization
import Waiting

// The pipeline's partition bookkeeping: registering events, finishing their pieces, handing commit positions to
// the source, and following assignments and revocations (the state is a ``PartitionTable``).
extension Pipeline {
    /// One event's place in its partition's progress.
    struct Ticket: Sendable {
        var partition: PartitionID
        var offset: Int64
        var generation: UInt64
        /// ``Pipeline/revocations`` when the event began.
        var revocations: UInt64
    }

    /// What ``begin(_:pieces:)`` found.
    private enum Begun {
        case begun(Ticket)
        /// Its partition is not assigned here, is being revoked, or was assigned again since it was fetched.
        case stale
        case offsetNotIncreasing
    }

    /// Registers `event` with `pieces` pieces of work; `nil` when it is stale: its partition is not assigned
    /// here, is being revoked, or was assigned again since the event was fetched.
    func begin(_ event: SourceEvent, pieces: Int) -> Ticket? {
        let partition = event.partition
        let offset = event.source.offset
        let now = ContinuousClock.now
        return self.table.withLock { table -> Ticket? in
            let begun = table.withState(for: partition, generation: event.assignmentGeneration) { state -> Begun in
                // A partition whose revocation began takes nothing more: its next owner starts where the commit is.
                guard !state.revoking else { return .stale }
                guard state.progress.begin(offset: offset, pieces: pieces, at: now) else { return .offsetNotIncreasing }
                if pieces == 0, state.progress.finish(offset: offset), let commit = state.progress.commitOffset {
                    self.source.markFinished(partition, nextOffset: commit)
                }
                return .begun(
                    Ticket(
                        partition: partition, offset: offset, generation: state.generation,
                        revocations: self.revocations.load(ordering: .relaxed)))
            }
            switch begun ?? .stale {
            case .stale:
                return nil
            case .begun(let ticket):
                return ticket
            case .offsetNotIncreasing:
                // Cannot happen while the source keeps its contract (offsets increase within a generation);
                // dropping the event is safe only because the source would deliver it again.
                self.logger.error(
                    "Event offset does not increase within its assignment; skipped",
                    metadata: ["kafka.partition": "\(partition)", "kafka.offset": "\(offset)"]
                )
                return nil
            }
        }
    }

    /// One piece of the ticket's event is acknowledged.
    ///
    /// The new commit position is handed to the source *inside* the lock: pieces finish on many threads, and
    /// two positions handed over outside it could arrive in the wrong order, storing an older offset last
    /// (librdkafka stores whatever it is given).
    func pieceFinished(_ ticket: Ticket) {
        self.table.withLock { table in
            _ = table.withCurrentState(of: ticket.partition, generation: ticket.generation) { state in
                if state.progress.finishPiece(offset: ticket.offset), let commit = state.progress.commitOffset {
                    self.source.markFinished(ticket.partition, nextOffset: commit)
                }
            }
        }
    }

    /// For each assigned partition, how long its oldest unfinished event has waited (zero when none waits):
    /// the `pushbridge_oldest_unfinished_seconds` gauge.
    package func oldestUnfinished() -> [(PartitionID, Duration)] {
        let now = ContinuousClock.now
        return self.table.withLock { table in
            table.partitions.map { partition, state in
                (partition, state.progress.oldestUnfinishedSince.map { now - $0 } ?? .zero)
            }
        }
    }

    /// The notifications waiting in the deepest per-key line: the `pushbridge_ordering_max_waiting` gauge.
    package var deepestOrderingLine: Int {
        self.lines.withLock { $0.deepestWaiting }
    }

    func assigned(_ partitions: [PartitionID], generation: UInt64) {
        self.table.withLock { table in
            for partition in partitions { _ = table.withState(for: partition, generation: generation) { _ in } }
        }
        self.flow.assigned(partitions)
        self.logger.info("Partitions assigned", metadata: ["kafka.partitions": "\(partitions)"])
    }

    func revoked(_ partitions: [PartitionID]) async {
        // The generations being revoked: a revocation that outlived the source's patience must not remove the
        // state of a later assignment of the same partition. From here on they take no new event.
        let revoking = self.table.withLock { table in
            // Counted under the table's lock, as tickets read it: a ticket of an event begun before this saw the
            // older count.
            self.revocations.add(1, ordering: .relaxed)
            return partitions.compactMap { partition -> (PartitionID, UInt64)? in
                guard let generation = table.partitions[partition]?.generation else { return nil }
                table.partitions[partition]?.revoking = true
                return (partition, generation)
            }
        }
        self.forgetHeldBack(partitions)
        self.dropWaiting(of: Dictionary(revoking, uniquingKeysWith: max))
        // Waits for their events in flight to finish (each finish changes the table), for the drain time at most; not
        // at all once a shutdown's drain gave up on them (the consumer's close revokes everything after it, and
        // waiting again would only hold up the member's leaving).
        let drain = self.isAbandoned ? Duration.zero : self.configuration.rebalanceDrainTimeout
        _ = await self.table.wait(deadline: .now + drain) { table in
            let busy = revoking.contains { partition, generation in
                guard let state = table.partitions[partition], state.generation == generation else { return false }
                return state.progress.awaitedCount > 0
            }
            return busy ? nil : ()
        }
        let abandoned = self.table.withLock { table in
            revoking.reduce(0) { sum, entry in
                let (partition, generation) = entry
                table.revoked[partition] = max(table.revoked[partition, default: 0], generation)
                guard let state = table.partitions[partition], state.generation == generation else { return sum }
                table.partitions[partition] = nil
                return sum + state.progress.unfinishedCount
            }
        }
        self.flow.revoked(partitions)
        if abandoned > 0 {
            self.logger.warning(
                "Revoked partitions still had unfinished events; they stay uncommitted",
                metadata: ["kafka.partitions": "\(partitions)", "pipeline.unfinished": "\(abandoned)"]
            )
        } else {
            self.logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(partitions)"])
        }
    }

    /// Whether the ticket's partition is still assigned here in the ticket's generation and not being revoked.
    func isCurrent(_ ticket: Ticket) -> Bool {
        if self.revocations.load(ordering: .relaxed) == ticket.revocations { return true }
        return self.table.withLock { table in
            guard let state = table.partitions[ticket.partition] else { return false }
            return state.generation == ticket.generation && !state.revoking
        }
    }

    /// A piece of an event whose partition was revoked (or is being revoked) before the piece started: it is not
    /// sent, since the partition's next owner sends it from the committed offset; the event stays uncommitted and
    /// the piece's room is returned.
    func dropStale(_ ticket: Ticket, bytes: Int, places: Int, lane: Lane?) {
        self.abandonUnstarted(ticket)
        self.releaseRoom(bytes: bytes, places: places, lane: lane)
    }

    /// The ticket's event will not finish here: a piece of it is dropped (or will never start, its partition being
    /// revoked), so it stays uncommitted, and a revocation does not wait for it.
    func abandonUnstarted(_ ticket: Ticket) {
        self.table.withLock { table in
            _ = table.withCurrentState(of: ticket.partition, generation: ticket.generation) { state in
                state.progress.abandonPiece(offset: ticket.offset)
            }
        }
    }

    /// Drops the notifications of `revoking` (partition: generation) that wait in their ordered lines, not yet sent:
    /// sent after the partition moved, they would reach their devices after (or again besides) what the next owner
    /// sends of the same keys from the committed offset. Their events stay unfinished, so uncommitted, and the next
    /// owner sends them in order; their room is returned. Only a line's item already in flight may be sent twice.
    private func dropWaiting(of revoking: [PartitionID: UInt64]) {
        guard !revoking.isEmpty else { return }
        let dropped = self.lines.withLock { lines in
            lines.removeWaiting { waiting in
                revoking[waiting.delivery.ticket.partition] == waiting.delivery.ticket.generation
            }
        }
        guard !dropped.isEmpty else { return }
        for waiting in dropped {
            // A waiting notification holds its bytes only (see ``Delivery/holdsPlace``).
            self.dropStale(
                waiting.delivery.ticket, bytes: waiting.delivery.bytes, places: 0, lane: waiting.delivery.lane)
        }
        self.lineMoved()
        self.logger.info(
            "Ordered notifications of revoked partitions dropped before sending; their next owner sends them in order",
            metadata: [
                "kafka.partitions": "\(revoking.keys.sorted { "\($0)" < "\($1)" })",
                "pipeline.dropped": "\(dropped.count)",
            ])
    }

    struct Listener: RebalanceListener {
        let pipeline: Pipeline

        func partitionsAssigned(_ partitions: [PartitionID], generation: UInt64) async {
            self.pipeline.assigned(partitions, generation: generation)
        }

        func partitionsRevoked(_ partitions: [PartitionID]) async {
            await self.pipeline.revoked(partitions)
        }
    }
}
