import DequeModule
import Logging
import Routing
import Synchronization
import Waiting

// Hot keys (issue 28): one ordered key whose updates come faster than APNs answers them builds a line, and a line's
// waiting notifications must not hold up the other keys. A waiting notification holds its bytes but no place in
// `kafka.max_in_flight` (``Delivery/holdsPlace``), and a line holds at most ``PipelineConfiguration/maxWaitingPerKey``:
// an event that would add to a full line holds back its own partition, and only it, until the line is down to half.
extension Pipeline {
    /// The partitions held back behind a full ordered line.
    struct Parking: Sendable {
        /// Each held-back partition's events, oldest first, and the line its first one waits for.
        var partitions: [PartitionID: HeldBack] = [:]
        /// Moves of watched lines so far: the held-back partitions' tasks wait for a change of it.
        var lineMoves: UInt64 = 0
        /// Set once the pipeline stops taking events: the held-back events stay untaken (so uncommitted).
        var stopping = false
    }

    struct HeldBack: Sendable {
        var events: Deque<SourceEvent>
        /// The full line the first event waits for.
        var line: LineKey
    }

    /// The ordered line of one of `results`' notifications that holds ``PipelineConfiguration/maxWaitingPerKey``
    /// waiting notifications; `nil` when none does (and at once, without a lock, when no notification is ordered).
    func fullLine(of results: [RouteMapping]) -> LineKey? {
        var keys: [LineKey] = []
        for result in results {
            guard case .notifications(let notifications) = result.outcome else { continue }
            for routed in notifications {
                if let key = LineKey(route: result.route, routed: routed) { keys.append(key) }
            }
        }
        guard !keys.isEmpty else { return nil }
        let limit = self.configuration.maxWaitingPerKey
        return self.lines.withLock { lines in keys.first { lines.waitingCount(for: $0) >= limit } }
    }

    /// Queues `event` behind its partition's held-back events, if it has any; returns whether it did.
    func queueIfHeldBack(_ event: SourceEvent) -> Bool {
        self.parking.withLock { parking in
            guard parking.partitions[event.partition] != nil else { return false }
            parking.partitions[event.partition]?.events.append(event)
            return true
        }
    }

    /// Holds back `event`'s partition behind the full `line`: the partition is paused at the source on its own, the
    /// events of it that still come queue behind `event`, and a task in `group` takes them in order once the line
    /// is down to half (``takeHeldBack(_:)``). The other partitions go on.
    func park(_ event: SourceEvent, behind line: LineKey, in group: inout DiscardingTaskGroup) {
        let partition = event.partition
        let first = self.parking.withLock { parking -> Bool in
            if parking.partitions[partition] != nil {
                parking.partitions[partition]?.events.append(event)
                return false
            }
            parking.partitions[partition] = HeldBack(events: [event], line: line)
            return true
        }
        guard first else { return }
        self.parkedCount.add(1, ordering: .relaxed)
        self.flow.park(partition)
        self.logger.notice(
            "Partition held back: an ordered key's line is full; the other partitions go on",
            metadata: [
                "kafka.partition": "\(partition)", "pipeline.route": "\(line.route)",
                "pipeline.max_waiting_per_key": "\(self.configuration.maxWaitingPerKey)",
            ])
        group.addTask { await self.takeHeldBack(partition) }
    }

    /// A watched line moved (or lines were emptied): wakes the held-back partitions' tasks. Costs one load while
    /// nothing is held back.
    func lineMoved() {
        guard self.parkedCount.load(ordering: .relaxed) > 0 else { return }
        self.parking.withLock { $0.lineMoves &+= 1 }
    }

    /// Takes a held-back partition's events in order, each once the line it waits for is down to half of
    /// ``PipelineConfiguration/maxWaitingPerKey``; when none is left, the partition goes back to the consume loop
    /// and is resumed. Ends early, leaving the rest untaken (uncommitted), when the partition is revoked or the
    /// pipeline stops.
    func takeHeldBack(_ partition: PartitionID) async {
        let resumeAt = self.configuration.maxWaitingPerKey / 2
        var sends: [SendRequest] = []
        await withDiscardingTaskGroup { group in
            holding: while true {
                self.send(&sends)
                let ready = await self.parking.wait { parking -> Bool? in
                    guard !parking.stopping, let held = parking.partitions[partition] else { return false }
                    return self.lines.withLock { $0.waitingCount(for: held.line) } <= resumeAt ? true : nil
                }
                guard case .satisfied(true) = ready else { break }
                while let event = self.parking.withLock({ $0.partitions[partition]?.events.popFirst() }) {
                    switch await self.take(event, in: &group, sends: &sends) {
                    case .taken:
                        continue
                    case .stopped:
                        break holding
                    case .lineFull(let line):
                        self.parking.withLock { parking in
                            parking.partitions[partition]?.events.prepend(event)
                            parking.partitions[partition]?.line = line
                        }
                        continue holding
                    }
                }
                // Released only when nothing came in meanwhile: the consume loop queues under the same lock.
                let released = self.parking.withLock { parking -> Bool? in
                    guard let held = parking.partitions[partition] else { return nil }  // revoked meanwhile
                    guard held.events.isEmpty else { return false }
                    parking.partitions[partition] = nil
                    self.parkedCount.subtract(1, ordering: .relaxed)
                    return true
                }
                switch released {
                case .none:
                    break holding
                case .some(false):
                    continue holding
                case .some(true):
                    self.flow.unpark(partition)
                    self.logger.info("Held-back partition goes on", metadata: ["kafka.partition": "\(partition)"])
                    break holding
                }
            }
            self.send(&sends)
        }
    }

    /// Lets go of the held-back events of `partitions`, which are being revoked: never begun, they are the next
    /// owner's from the committed offset.
    func forgetHeldBack(_ partitions: [PartitionID]) {
        guard self.parkedCount.load(ordering: .relaxed) > 0 else { return }
        self.parking.withLock { parking in
            for partition in partitions where parking.partitions.removeValue(forKey: partition) != nil {
                self.parkedCount.subtract(1, ordering: .relaxed)
            }
        }
    }
}
