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
    }

    /// Registers `event` with `pieces` pieces of work; `nil` when it is stale: its partition is not assigned
    /// here, or was assigned again since the event was fetched.
    func begin(_ event: SourceEvent, pieces: Int) -> Ticket? {
        let partition = event.partition
        let offset = event.source.offset
        let now = ContinuousClock.now
        return self.table.withLock { table -> Ticket? in
            let begun = table.withState(for: partition, generation: event.assignmentGeneration) { state -> Ticket? in
                guard state.progress.begin(offset: offset, pieces: pieces, at: now) else { return nil }
                if pieces == 0, state.progress.finish(offset: offset), let commit = state.progress.commitOffset {
                    self.source.markFinished(partition, nextOffset: commit)
                }
                return Ticket(partition: partition, offset: offset, generation: state.generation)
            }
            switch begun {
            case .none:
                return nil  // stale
            case .some(.some(let ticket)):
                return ticket
            case .some(.none):
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

    func assigned(_ partitions: [PartitionID], generation: UInt64) {
        self.table.withLock { table in
            for partition in partitions { _ = table.withState(for: partition, generation: generation) { _ in } }
        }
        self.flow.assigned(partitions)
        self.logger.info("Partitions assigned", metadata: ["kafka.partitions": "\(partitions)"])
    }

    func revoked(_ partitions: [PartitionID]) async {
        // The generations being revoked: a revocation that outlived the source's patience must not remove the
        // state of a later assignment of the same partition.
        let revoking = self.table.withLock { table in
            partitions.compactMap { partition in table.partitions[partition].map { (partition, $0.generation) } }
        }
        // Waits for their unfinished events to finish (each finish changes the table), for the drain time at most.
        _ = await self.table.wait(deadline: .now + self.configuration.drainTimeout) { table in
            let busy = revoking.contains { partition, generation in
                guard let state = table.partitions[partition], state.generation == generation else { return false }
                return state.progress.unfinishedCount > 0
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
