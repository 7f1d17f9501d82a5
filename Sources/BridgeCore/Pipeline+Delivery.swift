import APNSCore
import CoreMetrics
import Logging
import Routing
import Synchronization

// Delivering one notification: starting it without a task when it can, its ordered line, the state machine driven
// in a task when it needs more than one send, and publishing its outcome.

extension Pipeline {
    /// One notification on its way, and what its outcome needs. A class: it is captured by the answer's
    /// callback and read again for the outcome, and copying its ~20 references at each step cost more than
    /// one allocation.
    final class Delivery: Sendable {
        let routed: MappedNotification
        let route: String
        let app: String?
        /// Where its event came from, for its records (not the whole event: its value and headers stay with
        /// the event's own work).
        let source: SourceCoordinates
        let ticket: Ticket
        /// The room it holds in the line.
        let bytes: Int
        /// Whether it holds a place in `kafka.max_in_flight`'s count: not while it waits in its ordered line, where it
        /// holds only its bytes, so that a hot key's waiting notifications cannot take every place.
        let holdsPlace = Atomic<Bool>(true)
        /// Its route's context and the event's forwarded headers, shared by the event's notifications; `nil` when
        /// there are none (the usual case).
        let extras: RecordExtras?
        /// The lane whose room it holds too; `nil` without lanes.
        let lane: Lane?

        init(
            routed: MappedNotification, route: String, app: String?, event: SourceEvent, ticket: Ticket, bytes: Int,
            extras: RecordExtras? = nil, lane: Lane? = nil
        ) {
            if let lane, lane.expedite {
                self.routed = routed.expedited()
            } else {
                self.routed = routed
            }
            self.route = route
            self.app = app
            self.source = event.source
            self.ticket = ticket
            self.bytes = bytes
            self.extras = extras
            self.lane = lane
        }

        var notification: Notification { self.routed.notification }

        /// Its line, when its route orders notifications (`ordering_key`): the route, the key and the destination
        /// (the device token, or a broadcast's channel ID). Made only when needed, so unordered notifications carry
        /// nothing for it.
        var lineKey: LineKey? { LineKey(route: self.route, routed: self.routed) }
    }

    /// The line a notification of an ordered route waits in. The destination (device token, or a broadcast's
    /// channel ID) is part of it: order matters per device or channel, and a fan-out event's notifications to
    /// different devices must not wait for one another (nor, with `coalesce`, replace one another).
    struct LineKey: Hashable, Sendable {
        var route: String
        var key: [UInt8]
        var destination: String

        /// The line of a notification of `route`, when the route orders its notifications.
        init?(route: String, routed: MappedNotification) {
            guard let key = routed.orderingKey else { return nil }
            self.route = route
            self.key = key
            self.destination = routed.notification.channelID ?? routed.notification.deviceToken
        }
    }

    /// A notification waiting in its line, with its state machine as it was when it arrived.
    struct WaitingDelivery: Sendable {
        var delivery: Delivery
        var machine: DeliveryStateMachine
    }

    /// Work to go on with in a task (see ``resumptions``).
    enum Resumption: Sendable {
        /// A delivery whose state machine asked for more than a send and a final answer.
        case deliver(Delivery, DeliveryStateMachine, DeliveryStateMachine.Action)
        /// A record the producer could not take without waiting.
        case publish(OutgoingRecord, acknowledged: @Sendable () -> Void)
        /// A record Kafka failed, to publish again after a backoff.
        case publishAfterBackoff(RecordPublication)
    }

    /// Starts a delivery. The common case, the line open and the first answer final, runs without a task: the
    /// request joins `sends`, and the answer's thread publishes the outcome; a local fault is published at
    /// once. Anything else (a retry, a halt, a closed gate) goes on in ``deliver(_:machine:action:)`` in a task.
    /// A notification of an ordered route whose line is busy waits in it (see ``lines``) instead.
    ///
    /// `retry`: the retry policy of the live settings the event was mapped with (``Pipeline/reload(_:)``).
    func start(
        _ delivery: Delivery, coalesces: Bool, retry: (maxAttempts: Int, backoff: Backoff),
        in group: inout DiscardingTaskGroup, sends: inout [SendRequest]
    ) {
        // Its event began before a revocation of its partition (it waited for room meanwhile): the next owner sends
        // it, in order, from the committed offset.
        guard self.isCurrent(delivery.ticket) else {
            return self.dropStale(delivery.ticket, bytes: delivery.bytes, places: 1, lane: delivery.lane)
        }
        var machine = DeliveryStateMachine(
            expirationEpochSeconds: delivery.routed.notification.expirationEpochSeconds,
            localFault: delivery.routed.localRejection
                ?? self.validate(delivery.routed.notification, delivery.routed.payloadIsJSONObject, delivery.app),
            maxAttempts: retry.maxAttempts,
            backoff: retry.backoff
        )
        let action = machine.start(nowEpochMilliseconds: self.epochMilliseconds())
        if case .finish(let outcome) = action {
            // A local fault, or expired before sending: nothing to wait for, and never sent, so it takes no
            // place in its line either.
            return self.finishNow(delivery, outcome: outcome, holdsLine: false)
        }
        if let key = delivery.lineKey, !self.enterLine(delivery, machine: machine, key: key, coalesces: coalesces) {
            return
        }
        guard case .send = action, self.gate.current == nil else {
            group.addTask { await self.deliver(delivery, machine: machine, action: action) }
            return
        }
        sends.append(self.sendRequest(delivery, machine: machine))
    }

    /// The request for a delivery that goes out now without a task; its answer's thread publishes a final outcome
    /// and hands anything else to a task.
    private func sendRequest(_ delivery: Delivery, machine: DeliveryStateMachine) -> SendRequest {
        var machine = machine
        machine.sending(nowEpochMilliseconds: self.epochMilliseconds())
        // Not a `ContinuousClock.Instant`: the closure's context would be laid out at run time (``MonotonicTime``).
        let started = MonotonicTime.now
        return SendRequest(notification: delivery.routed.notification, app: delivery.app) { [self, machine] result in
            if case .answered = result {
                self.metrics.apnsRequestDuration.recordInterval(since: started)
            }
            var machine = machine
            let action = machine.received(result, nowEpochMilliseconds: self.epochMilliseconds())
            if case .finish(let outcome) = action {
                self.finishNow(delivery, outcome: outcome)
            } else {
                self.resumptions.continuation.yield(.deliver(delivery, machine, action))
            }
        }
    }

    // MARK: Per-key order

    /// Puts an ordered delivery in its line. Returns `true` when the line was empty (the delivery is its item in
    /// flight: send it now), `false` when it waits; with `coalesces`, the deliveries it replaced end `superseded`.
    private func enterLine(
        _ delivery: Delivery, machine: DeliveryStateMachine, key: LineKey, coalesces: Bool
    ) -> Bool {
        // Marked before it can be seen in the line: once there, its turn may come (and take a place back) on another
        // thread before this one returns the place it leaves while it waits (see ``Delivery/holdsPlace``).
        delivery.holdsPlace.store(false, ordering: .relaxed)
        let arrival = self.lines.withLock {
            $0.arrive(WaitingDelivery(delivery: delivery, machine: machine), key: key, coalesce: coalesces)
        }
        switch arrival {
        case .send:
            delivery.holdsPlace.store(true, ordering: .relaxed)  // never in the line: nobody else saw it
            return true
        case .wait(let replaced):
            self.releaseRoom(bytes: 0, places: 1, lane: delivery.lane)
            for waiting in replaced {
                let outcome = waiting.machine.superseded(
                    by: delivery.notification.apnsID, nowEpochMilliseconds: self.epochMilliseconds())
                self.finishNow(waiting.delivery, outcome: outcome, holdsLine: false)
            }
            return false
        }
    }

    /// The delivery in flight of `key` has its final outcome: hands the line's next ones over, in a loop (see
    /// ``OrderingStateMachine``), each sent without a task when it can be.
    private func lineFinished(_ key: LineKey) {
        var next = self.lines.withLock { $0.finished(key: key) }
        while let waiting = next {
            self.sendInTurn(waiting)
            next = self.lines.withLock { $0.handedOver(key: key) }
        }
        self.lineMoved()
    }

    /// Sends a delivery whose turn came: at once when the gate is open, else in a task; one that expired while it
    /// waited is finished (its line moves on when its hand-over ends).
    private func sendInTurn(_ waiting: WaitingDelivery) {
        let delivery = waiting.delivery
        // In flight again: it takes its place in the count back.
        delivery.holdsPlace.store(true, ordering: .relaxed)
        (delivery.lane?.flow ?? self.flow).retakePlace()
        var machine = waiting.machine
        let action = machine.turnCame(nowEpochMilliseconds: self.epochMilliseconds())
        if case .finish(let outcome) = action {
            return self.finishNow(delivery, outcome: outcome)
        }
        guard case .send = action, self.gate.current == nil else {
            self.resumptions.continuation.yield(.deliver(delivery, machine, action))
            return
        }
        let request = self.sendRequest(delivery, machine: machine)
        self.sender.send(request.notification, app: request.app, completion: request.completion)
    }

    /// Gives each ``Resumption`` a task, until ``run()`` finishes the stream (or cancels this task).
    func runResumptions() async {
        await withDiscardingTaskGroup { group in
            for await resumption in self.resumptions.stream {
                switch resumption {
                case .deliver(let delivery, let machine, let action):
                    group.addTask { await self.deliver(delivery, machine: machine, action: action) }
                case .publish(let record, let acknowledged):
                    group.addTask { await self.publishLater(record, acknowledged: acknowledged) }
                case .publishAfterBackoff(let retry):
                    group.addTask { await self.publishAfterBackoff(retry) }
                }
            }
        }
    }

    /// Drives a delivery's state machine from `action` to its outcome, waiting where it says. Returns early, the
    /// delivery unfinished (so uncommitted), when cancelled by the drain timeout.
    private func deliver(
        _ delivery: Delivery, machine: DeliveryStateMachine, action: DeliveryStateMachine.Action
    ) async {
        var machine = machine
        var action = action
        // The task that closed the gate probes APNs with its own notification and reopens the gate.
        var probe = HaltProbe()
        while true {
            switch action {
            case .send:
                guard let next = await self.sendOnce(delivery, machine: &machine, probe: &probe) else { return }
                action = next
            case .wait(let delay):
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                action = machine.retryDue(nowEpochMilliseconds: self.epochMilliseconds())
            case .halt(let reason):
                guard await self.waitOutHalt(reason: reason, app: delivery.app, probe: &probe) else { return }
                action = machine.resumed(nowEpochMilliseconds: self.epochMilliseconds())
            case .finish(let outcome):
                if probe.active {
                    // Expired while probing: open the gate; the next systemic answer closes it again and
                    // that sender probes.
                    self.gate.resume()
                }
                // The task ends here; the room stays taken until Kafka acknowledged the records.
                self.finishNow(delivery, outcome: outcome)
                return
            }
        }
    }

    /// Whether this delivery's task is the one probing APNs while the line is halted, and how often it probed.
    private struct HaltProbe {
        var active = false
        var count = 0
    }

    /// Sends the notification once, after the gate opens (a probe goes through the closed gate), and returns the
    /// state machine's next action; a probe that was answered without a halt reopens the gate. `nil` when
    /// cancelled while waiting for the gate.
    private func sendOnce(
        _ delivery: Delivery, machine: inout DeliveryStateMachine, probe: inout HaltProbe
    ) async -> DeliveryStateMachine.Action? {
        if !probe.active {
            guard (try? await self.gate.waitUntilOpen()) != nil else { return nil }
        }
        machine.sending(nowEpochMilliseconds: self.epochMilliseconds())
        let started = MonotonicTime.now
        let result = await self.sender.send(delivery.notification, app: delivery.app)
        if case .answered = result {
            self.metrics.apnsRequestDuration.recordInterval(since: started)
        }
        let action = machine.received(result, nowEpochMilliseconds: self.epochMilliseconds())
        if probe.active, !action.isHalt {
            probe.active = false
            self.gate.resume()
        }
        return action
    }

    /// A systemic answer halts the line: the task that closes the gate (or already probes) waits out the probe
    /// backoff and probes next; every other task waits for the gate to open. `false` when cancelled meanwhile.
    private func waitOutHalt(reason: String, app: String?, probe: inout HaltProbe) async -> Bool {
        guard probe.active || self.gate.halt(reason: "app \(app ?? "default"): \(reason)") else {
            return (try? await self.gate.waitUntilOpen()) != nil
        }
        probe.active = true
        probe.count += 1
        return (try? await Task.sleep(for: self.configuration.haltProbeBackoff.delay(afterAttempt: probe.count))) != nil
    }

    /// Publishes the notification's outcome (and invalid-token record) without waiting; when Kafka
    /// acknowledged them, counts it and finishes its piece. A record the producer cannot take at once is
    /// published from a task (see ``Resumption``).
    ///
    /// `holdsLine`: whether the notification is its line's item in flight (a notification of an ordered route
    /// that was sent, or whose turn came); its line then moves on. Its next notification need not wait for Kafka:
    /// the order is the order of sends.
    private func finishNow(_ delivery: Delivery, outcome: DeliveryOutcome, holdsLine: Bool = true) {
        if holdsLine, let key = delivery.lineKey {
            self.lineFinished(key)
        }
        // Fields are read through the delivery, not copied out of it as a whole: a copy of the notification retains
        // and releases each of its strings, and this runs once per notification.
        let record = OutcomeRecord(
            notificationID: delivery.routed.notification.apnsID,
            route: delivery.route,
            source: delivery.source,
            deviceToken: delivery.routed.notification.deviceToken,
            apnsTopic: delivery.routed.notification.topic,
            pushType: delivery.routed.notification.pushType.rawValue,
            priority: delivery.routed.notification.priority.rawValue,
            status: outcome.status,
            httpStatus: outcome.httpStatus,
            reason: outcome.reason,
            apnsUniqueID: outcome.apnsUniqueID,
            attempts: outcome.attempts,
            latencyMilliseconds: outcome.firstSentAtEpochMilliseconds.map {
                Double(outcome.completedAtEpochMilliseconds - $0)
            },
            sentAtEpochMilliseconds: outcome.firstSentAtEpochMilliseconds,
            completedAtEpochMilliseconds: outcome.completedAtEpochMilliseconds,
            channelID: delivery.routed.notification.channelID,
            supersededBy: outcome.supersededBy,
            context: delivery.extras?.context
        )
        let value = record.encoded()
        let headers = self.recordHeaders(of: delivery)
        let outcomeRecord = OutgoingRecord(
            topic: self.configuration.outcomesTopic, key: self.outcomeKey(of: delivery), value: value, headers: headers)
        // A broadcast has no device token to forget, whatever the answer's reason says.
        let invalidTokenReason = delivery.routed.notification.isBroadcast ? nil : outcome.invalidTokenReason
        var invalidTokenRecord: OutgoingRecord?
        if let reason = invalidTokenReason {
            let invalid = InvalidTokenRecord(
                deviceToken: delivery.routed.notification.deviceToken,
                apnsTopic: delivery.routed.notification.topic,
                reason: reason,
                invalidSinceEpochMilliseconds: outcome.invalidSinceEpochMilliseconds,
                notificationID: delivery.routed.notification.apnsID,
                route: delivery.route,
                source: delivery.source,
                context: delivery.extras?.context
            )
            // The outcome's key: the device token's (a broadcast has no invalid-token record), or what
            // `outcomes.key` chose.
            invalidTokenRecord = OutgoingRecord(
                topic: self.configuration.invalidTokensTopic, key: outcomeRecord.key, value: invalid.encoded(),
                headers: headers)
        }
        self.publishOutcome(
            outcomeRecord, invalidToken: invalidTokenRecord, of: delivery, status: outcome.status,
            reason: outcome.reason, invalidTokenReason: invalidTokenReason)
        if outcome.status != .delivered {
            self.logger.debug(
                "Notification not delivered",
                metadata: [
                    delivery.routed.notification.isBroadcast ? "apns.channel" : "apns.token":
                        "\(delivery.routed.notification.destinationForLog)",
                    "apns.status": "\(outcome.status.rawValue)",
                    "apns.reason": "\(outcome.reason ?? "")",
                    "pipeline.route": "\(delivery.route)",
                ]
            )
        }
    }
}

extension DeliveryStateMachine.Action {
    fileprivate var isHalt: Bool {
        if case .halt = self { return true }
        return false
    }
}

extension Timer {
    /// Records the time since `start`.
    fileprivate func recordInterval(since start: MonotonicTime) {
        self.recordNanoseconds((MonotonicTime.now - start).saturatedNanoseconds)
    }
}
