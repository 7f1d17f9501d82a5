import DequeModule
import Logging
import Routing
import Synchronization
import Waiting

// Hot keys (issue 28): one ordered key whose updates come faster than APNs answers them builds a line, and a line's
// waiting notifications must not hold up the other keys. A waiting notification holds its bytes but no place in
// `kafka.max_in_flight` (``Delivery/holdsPlace``), and a line holds at most ``PipelineConfiguration/maxWaitingPerKey``:
// an event that would add to a full line holds back its own partition, and only it, until the line is down to half.
// Lanes (issue 32) hold back the same way a partition whose next piece finds its lane full (``holdBack(_:for:in:)``).
extension Pipeline {
    /// The partitions held back behind a full ordered line or a full lane.
    struct Parking: Sendable {
        /// Each held-back partition's events, oldest first, and what its first one waits for.
        var partitions: [PartitionID: HeldBack] = [:]
        /// Moves of watched lines so far: the held-back partitions' tasks wait for a change of it.
        var lineMoves: UInt64 = 0
        /// Set once the pipeline stops taking events: the held-back events stay untaken (so uncommitted).
        var stopping = false
        /// The last hold's number: a hold's task touches only its own hold, not a later one of the same partition
        /// (revoked, assigned again and held back again while the first task still waited for room).
        var holds: UInt64 = 0
    }

    struct HeldBack: Sendable {
        var events: Deque<SourceEvent>
        /// The full line the first event waits for; `nil` while it waits for room in a lane.
        var line: LineKey?
        /// The lane the partition last waited for room in, if any (`pushbridge_lane_held_back_partitions`); its
        /// ``Lane/heldBytes`` count ``bytes``.
        var lane: Lane? = nil
        /// An event begun whose pieces wait for room in their lane: started before ``events``.
        var rest: PiecesToStart? = nil
        /// Its number (``Parking/holds``).
        var id: UInt64 = 0
        /// The event whose pieces the hold's task waits for room for: abandoned when the partition is revoked.
        var starting: Ticket? = nil
        /// Whether the partition is paused at the source. A line's hold pauses it at once; a lane's only once the
        /// events queued in the lane's holds pass ``Lane/heldBackBoundBytes``: a full lane that moves takes them
        /// soon, and pausing at every fill would make librdkafka drop its prefetch and fetch it again each time.
        var paused = true
        /// The bytes of ``events`` (``bytes(of:)``), counted in ``lane``'s ``Lane/heldBytes`` too.
        var bytes = 0
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

    /// Queues `event` behind its partition's held-back events, if it has any; returns whether it did. A lane's hold
    /// whose lane has queued more than its bound pauses its partition now.
    func queueIfHeldBack(_ event: SourceEvent) -> Bool {
        let partition = event.partition
        // One lookup of the partition: this runs for every event of a held-back partition.
        let pause = self.parking.withLock { parking in
            parking.withHeld(partition) { held -> Bool in
                held.append(event)
                guard !held.paused, let lane = held.lane,
                    lane.heldBytes.load(ordering: .relaxed) > lane.heldBackBoundBytes
                else { return false }
                held.paused = true
                return true
            }
        }
        guard let pause else { return false }
        if pause { self.flow.park(partition) }
        return true
    }

    /// Holds back `event`'s partition behind the full `line`: the partition is paused at the source on its own, the
    /// events of it that still come queue behind `event`, and a task in `group` takes them in order once the line
    /// is down to half (``takeHeldBack(_:id:)``). The other partitions go on.
    func park(_ event: SourceEvent, behind line: LineKey, in group: inout DiscardingTaskGroup) {
        let held = self.hold(HeldBack(events: [event], line: line), of: event.partition, in: &group)
        guard held else { return }
        self.logger.notice(
            "Partition held back: an ordered key's line is full; the other partitions go on",
            metadata: [
                "kafka.partition": "\(event.partition)", "pipeline.route": "\(line.route)",
                "pipeline.max_waiting_per_key": "\(self.configuration.maxWaitingPerKey)",
            ])
    }

    /// Holds back `partition` with `held` as what it waits for, and starts the task that takes its events
    /// (``takeHeldBack(_:id:)``); a partition held back already (the consume loop does not take events of one) gets
    /// `held`'s events queued. Returns whether the partition was held back now.
    @discardableResult
    func hold(_ held: HeldBack, of partition: PartitionID, in group: inout DiscardingTaskGroup) -> Bool {
        let id = self.parking.withLock { parking -> UInt64? in
            if parking.partitions[partition] != nil {
                parking.withHeld(partition) { for event in held.events { $0.append(event) } }
                return nil
            }
            parking.holds &+= 1
            var fresh = held
            fresh.id = parking.holds
            fresh.paused = held.line != nil
            fresh.events = []
            fresh.bytes = 0
            for event in held.events { fresh.append(event) }
            parking.partitions[partition] = fresh
            return parking.holds
        }
        guard let id else { return false }
        self.parkedCount.add(1, ordering: .relaxed)
        if held.line != nil { self.flow.park(partition) }
        group.addTask { await self.takeHeldBack(partition, id: id) }
        return true
    }

    /// A watched line moved (or lines were emptied): wakes the held-back partitions' tasks. Costs one load while
    /// nothing is held back.
    func lineMoved() {
        guard self.parkedCount.load(ordering: .relaxed) > 0 else { return }
        self.parking.withLock { $0.lineMoves &+= 1 }
    }

    /// Takes a held-back partition's events in order: each once the line it waits for is down to half of
    /// ``PipelineConfiguration/maxWaitingPerKey``, or once its lane has room (waiting for it in the lane's turn);
    /// when none is left, the partition goes back to the consume loop and is resumed. Ends early, leaving the rest
    /// untaken (uncommitted), when the partition is revoked or the pipeline stops. `id`: the hold's number; a later
    /// hold of the partition is not this task's.
    func takeHeldBack(_ partition: PartitionID, id: UInt64) async {
        let resumeAt = self.configuration.maxWaitingPerKey / 2
        var sends: [SendRequest] = []
        let claim = HoldClaim(parking: self.parking, partition: partition, id: id)
        await withDiscardingTaskGroup { group in
            holding: while true {
                self.send(&sends)
                let ready = await self.parking.wait { parking -> Bool? in
                    guard !parking.stopping, let held = parking.partitions[partition], held.id == id else {
                        return false
                    }
                    // Room in a lane is waited for in the lane, in turn with the lane's other partitions (below).
                    guard let line = held.line else { return true }
                    return self.lines.withLock { $0.waitingCount(for: line) } <= resumeAt ? true : nil
                }
                guard case .satisfied(true) = ready else { break }
                if var rest = self.parking.withLock({ $0.withHeld(partition, id: id) { $0.rest.take() } ?? nil }) {
                    guard case .taken = await self.start(&rest, waits: true, claim: claim, in: &group, sends: &sends)
                    else {
                        break holding
                    }
                }
                while let event = self.parking.withLock({ $0.withHeld(partition, id: id) { $0.popFirst() } ?? nil }) {
                    switch await self.take(event, claim: claim, in: &group, sends: &sends) {
                    case .taken:
                        continue
                    case .stopped, .laneFull:  // never `laneFull`: this task waits for room
                        break holding
                    case .lineFull(let line):
                        // Behind a line now: paused, as any hold of a line.
                        let pause = self.parking.withLock { parking in
                            parking.withHeld(partition, id: id) { held -> Bool in
                                held.prepend(event)
                                held.line = line
                                defer { held.paused = true }
                                return !held.paused
                            } ?? false
                        }
                        if pause { self.flow.park(partition) }
                        continue holding
                    }
                }
                // Released only when nothing came in meanwhile: the consume loop queues under the same lock.
                let released = self.parking.withLock { parking -> (done: Bool, lane: String?)? in
                    guard let empty = parking.withHeld(partition, id: id, { $0.events.isEmpty }) else { return nil }
                    guard empty else { return (false, nil) }  // more came in meanwhile
                    let held = parking.remove(partition)
                    self.parkedCount.subtract(1, ordering: .relaxed)
                    return (true, held?.lane?.name)
                }
                switch released {
                case .none:
                    break holding
                case .some((false, _)):
                    continue holding
                case .some((true, let lane)):
                    self.flow.unpark(partition)  // nothing to resume when it was not paused
                    // A lane's holds come and go with every fill of a lane in a backlog: not worth a line at info.
                    self.logger.log(
                        level: lane == nil ? .info : .debug, "Held-back partition goes on",
                        metadata: ["kafka.partition": "\(partition)"])
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
        // Events begun whose pieces wait for room in a lane: abandoned, so the revocation does not wait for room.
        let begun = self.parking.withLock { parking -> [Ticket] in
            var begun: [Ticket] = []
            for partition in partitions {
                guard let held = parking.remove(partition) else { continue }
                self.parkedCount.subtract(1, ordering: .relaxed)
                begun += [held.rest?.ticket, held.starting].compactMap { $0 }
            }
            return begun
        }
        for ticket in begun { self.abandonUnstarted(ticket) }
    }
}

extension Pipeline.Parking {
    /// Runs `body` on `partition`'s hold in place (one lookup, and the queue never copied); `nil` without running it
    /// when the partition is not held back, or (with `id`) by another hold.
    mutating func withHeld<Result>(
        _ partition: PartitionID, id: UInt64? = nil, _ body: (inout Pipeline.HeldBack) -> Result
    ) -> Result? {
        guard let index = self.partitions.index(forKey: partition) else { return nil }
        if let id, self.partitions.values[index].id != id { return nil }
        return body(&self.partitions.values[index])
    }

    /// Ends `partition`'s hold; returns it.
    mutating func remove(_ partition: PartitionID) -> Pipeline.HeldBack? {
        guard let held = self.partitions.removeValue(forKey: partition) else { return nil }
        held.lane?.heldBytes.subtract(held.bytes, ordering: .relaxed)
        return held
    }
}

extension Pipeline.HeldBack {
    /// What a queued event holds for ``Lane/heldBytes``: its bytes and its place in the queue.
    static func bytes(of event: SourceEvent) -> Int {
        event.byteCount + 256
    }

    /// Queues `event` last.
    mutating func append(_ event: SourceEvent) {
        self.events.append(event)
        self.count(Self.bytes(of: event))
    }

    /// Queues `event` first (taken back after it found its line full).
    mutating func prepend(_ event: SourceEvent) {
        self.events.prepend(event)
        self.count(Self.bytes(of: event))
    }

    /// The first queued event, if any.
    mutating func popFirst() -> SourceEvent? {
        guard let event = self.events.popFirst() else { return nil }
        self.count(-Self.bytes(of: event))
        return event
    }

    /// The hold now waits for room in `lane`: its queued bytes count in that lane's.
    mutating func wait(in lane: Lane) {
        guard self.lane !== lane else { return }
        self.lane?.heldBytes.subtract(self.bytes, ordering: .relaxed)
        lane.heldBytes.add(self.bytes, ordering: .relaxed)
        self.lane = lane
    }

    private mutating func count(_ bytes: Int) {
        self.bytes += bytes
        self.lane?.heldBytes.add(bytes, ordering: .relaxed)
    }
}
