import APNSCore
import CoreMetrics
import Logging
import Routing
import ServiceLifecycle
import Synchronization

import struct Foundation.Date

/// What the pipeline needs to know beyond its parts (docs/configuration.md: `kafka`, `apns.retry`, `outcomes`).
public struct PipelineConfiguration: Sendable {
    /// `kafka.max_in_flight`: notifications (and dead letters) between consumption and acknowledgement.
    public var maxInFlight: Int
    /// `kafka.max_in_flight_bytes`: the bytes those pieces of work hold (their events, payloads and records).
    public var maxInFlightBytes: Int
    /// The largest record the producer takes (`message.max.bytes`): larger dead letters are truncated to fit.
    public var maxRecordBytes: Int
    /// `outcomes.publish_stall_timeout`: a record Kafka has not acknowledged for this long makes `/readyz`
    /// fail.
    public var publishStallTimeout: Duration
    /// `apns.retry.max_attempts`: sends per notification for retryable answers.
    public var maxAttempts: Int
    /// `apns.retry.initial_backoff` / `max_backoff`: waits between retryable attempts.
    public var retryBackoff: Backoff
    /// Waits between probes while the line is halted.
    public var haltProbeBackoff: Backoff
    /// Waits between attempts to publish a record Kafka did not acknowledge.
    public var publishBackoff: Backoff
    /// How long shutdown and revocation wait for in-flight work before abandoning it (uncommitted).
    public var drainTimeout: Duration
    /// `outcomes.topic`.
    public var outcomesTopic: String
    /// `outcomes.invalid_tokens_topic`.
    public var invalidTokensTopic: String
    /// `outcomes.dead_letter_topic`.
    public var deadLetterTopic: String

    /// Creates a configuration; the defaults are those of docs/configuration.md.
    public init(
        maxInFlight: Int = 10_000,
        maxInFlightBytes: Int = 64 << 20,
        maxRecordBytes: Int = 1_000_000,
        publishStallTimeout: Duration = .seconds(60),
        maxAttempts: Int = 5,
        retryBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(300)),
        haltProbeBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(60)),
        publishBackoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10)),
        drainTimeout: Duration = .seconds(30),
        outcomesTopic: String = "pushbridge.outcomes",
        invalidTokensTopic: String = "pushbridge.invalid-tokens",
        deadLetterTopic: String = "pushbridge.dead-letters"
    ) {
        self.maxInFlight = maxInFlight
        self.maxInFlightBytes = maxInFlightBytes
        self.maxRecordBytes = maxRecordBytes
        self.publishStallTimeout = publishStallTimeout
        self.maxAttempts = maxAttempts
        self.retryBackoff = retryBackoff
        self.haltProbeBackoff = haltProbeBackoff
        self.publishBackoff = publishBackoff
        self.drainTimeout = drainTimeout
        self.outcomesTopic = outcomesTopic
        self.invalidTokensTopic = invalidTokensTopic
        self.deadLetterTopic = deadLetterTopic
    }
}

/// The bridge: takes events from a source, maps them, sends the notifications, publishes what happened, and
/// lets the source commit an offset only once everything before it is acknowledged (docs/data-contract.md, docs/operations.md "Guarantees").
///
/// Every event becomes *pieces* of work: one per notification and one per dead letter. An event is finished
/// when all its pieces' records are acknowledged (or at once when no route matched it); ``PartitionProgress``
/// turns finished events into the offset the source may commit.
public final class Pipeline: Service, Sendable {
    let source: any EventSource
    private let mapper: any EventMapper
    private let sender: any NotificationSender
    let sink: any RecordSink
    let configuration: PipelineConfiguration
    let metrics: BridgeMetrics
    let logger: Logger
    private let validate: @Sendable (Notification, _ payloadIsJSONObject: Bool, _ app: String?) -> Reason?
    private let recordHeaders: @Sendable (_ app: String?) -> [(String, [UInt8]?)]
    private let epochMilliseconds: @Sendable () -> Int64

    /// The halt gate: closed while a systemic fault stops the line.
    public let gate: HaltGate
    let flow: FlowController
    /// Records Kafka failed and that are being published again.
    package let unpublished = UnpublishedRecords()
    let table = Mutex(PartitionTable())
    private let sourceFailure = Mutex<String?>(nil)
    /// Set when the drain timed out: in-flight work is abandoned (and stays uncommitted), so failed records
    /// are no longer published again.
    private let abandoned = Atomic<Bool>(false)
    /// Work that began without a task (a notification sent from the consuming task, answered on the sender's
    /// thread) and must now wait for something: a retry's backoff, the halt gate, room in the producer.
    /// ``run()`` gives each a task in its task group, so the drain's cancellation reaches them.
    let resumptions = AsyncStream<Resumption>.makeStream()
    /// The per-key lines of routes with `ordering_key`; notifications of other routes never touch it.
    private let lines = Mutex(OrderingStateMachine<LineKey, WaitingDelivery>())

    /// Creates the pipeline; nothing runs until ``run()``.
    ///
    /// - Parameters:
    ///   - validate: the bridge's own check of a notification before it is sent; a non-`nil` reason
    ///     rejects it with Apple's reason for that fault, without sending.
    ///   - recordHeaders: the Kafka headers of the outcome and invalid-token records of a notification for `app`
    ///     (``RecordHeader``).
    ///   - epochMilliseconds: the wall clock, for expiry and record timestamps.
    public init(
        source: any EventSource,
        mapper: any EventMapper,
        sender: any NotificationSender,
        sink: any RecordSink,
        configuration: PipelineConfiguration,
        metrics: BridgeMetrics,
        logger: Logger,
        validate: @escaping @Sendable (Notification, _ payloadIsJSONObject: Bool, _ app: String?) -> Reason? = {
            _, _, _ in nil
        },
        recordHeaders: @escaping @Sendable (_ app: String?) -> [(String, [UInt8]?)] = { _ in [] },
        epochMilliseconds: @escaping @Sendable () -> Int64 = Pipeline.systemEpochMilliseconds
    ) {
        self.source = source
        self.mapper = mapper
        self.sender = sender
        self.sink = sink
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.validate = validate
        self.recordHeaders = recordHeaders
        self.epochMilliseconds = epochMilliseconds
        let flow = FlowController(
            source: source,
            maxCount: configuration.maxInFlight,
            maxBytes: configuration.maxInFlightBytes,
            onChange: { levels in
                metrics.inFlight.record(levels.count)
                metrics.inFlightBytes.record(levels.bytes)
            }
        )
        self.flow = flow
        self.gate = HaltGate { [metrics, logger] halt in
            metrics.halted.record(halt == nil ? 0 : 1)
            if let halt {
                logger.error("Line halted: APNs refuses the provider", metadata: ["halt.reason": "\(halt.reason)"])
            } else {
                logger.notice("Line resumed: APNs accepts again")
            }
            flow.setHalted(halt != nil)
        }
    }

    /// The system's wall clock in milliseconds since the UNIX epoch.
    public static func systemEpochMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// What `/readyz` says: not ready while halted, after the source failed, or while a record could not be
    /// published for longer than `outcomes.publish_stall_timeout`.
    public var readiness: Readiness {
        if let halt = self.gate.current { return .notReady("halted: \(halt.reason)") }
        if let failure = self.sourceFailure.withLock({ $0 }) { return .notReady("kafka: \(failure)") }
        if let stall = self.unpublished.oldest(), stall.age >= self.configuration.publishStallTimeout {
            return .notReady(
                "kafka: \(stall.count) record(s) not published; the oldest for \(stall.age.wholeSeconds) s: \(stall.error)"
            )
        }
        return .ready
    }

    /// Notifications and dead letters in flight now.
    public var inFlight: Int { self.flow.inFlight.count }

    /// The bytes those hold.
    public var inFlightBytes: Int { self.flow.inFlight.bytes }

    /// Consumes until graceful shutdown (or cancellation), then stops fetching, drains in-flight work for
    /// at most the drain timeout, flushes the sink and closes the source, which commits what finished.
    public func run() async throws {
        let stream = try await self.source.start(listener: Listener(pipeline: self))
        var failure: (any Error)?
        await withDiscardingTaskGroup { group in
            group.addTask { await self.runResumptions() }
            do {
                // Shutdown also ends a wait for room: with the line full and halted nothing would free any.
                try await withGracefulShutdownHandler {
                    // Notifications to send, handed to the sender together (see `take`).
                    var sends: [SendRequest] = []
                    defer { self.send(&sends) }
                    batches: for try await batch in stream.cancelOnGracefulShutdown() {
                        for event in batch {
                            guard await self.take(event, in: &group, sends: &sends) else { break batches }
                        }
                        self.send(&sends)
                    }
                } onGracefulShutdown: {
                    self.flow.stopWaiting()
                }
            } catch is CancellationError {
                // Hard cancellation: the drain below ends at once.
            } catch {
                failure = error
                self.sourceFailure.withLock { $0 = "\(error)" }
                self.logger.error("Event source failed", error: error)
            }
            self.flow.stopWaiting()
            let drained = await self.flow.waitUntilEmpty(timeout: self.configuration.drainTimeout)
            if !drained {
                self.logger.warning(
                    "Drain timeout: abandoning in-flight work, which stays uncommitted",
                    metadata: ["pipeline.in_flight": "\(self.inFlight)"]
                )
                self.abandoned.store(true, ordering: .relaxed)
                group.cancelAll()
            }
            // Drained (nothing in flight can resume any more) or abandoned.
            self.resumptions.continuation.finish()
        }
        do {
            try await self.sink.flush(timeout: self.configuration.drainTimeout)
        } catch {
            self.logger.error("Flushing records failed", error: error)
        }
        await self.source.close()
        if let failure { throw failure }
    }

    // MARK: Taking events

    /// Maps `event` and starts its pieces. Returns `false` when shutdown (or cancellation) ended a wait for
    /// room: the event stays unfinished, so uncommitted, and nothing more is taken.
    ///
    /// Notifications that can be sent at once are collected in `sends` and handed to the sender together, at
    /// most ``sendBatchSize`` at a time, at the end of each batch of events and before any wait for room: one
    /// hand-over to a connection wakes its event loop once for all of them.
    private func take(
        _ event: SourceEvent, in group: inout DiscardingTaskGroup, sends: inout [SendRequest]
    ) async -> Bool {
        self.metrics.eventsConsumed(topic: event.source.topic)
        let results = self.mapper.map(event)
        var pieces = 0
        for result in results {
            switch result.outcome {
            case .notifications(let notifications): pieces += notifications.count
            case .deadLetter: pieces += 1
            }
        }
        guard let ticket = self.begin(event, pieces: pieces) else {
            // Its partition was revoked after it was fetched (and maybe assigned back): the source delivers it
            // again from the committed offset, here or to another instance.
            return true
        }
        if results.isEmpty {
            self.metrics.eventUnmatched(topic: event.source.topic)
            return true
        }
        // The event's bytes are shared out among its pieces, so room for all of them is released once every
        // piece is acknowledged; each piece adds what it holds itself.
        var share = PieceBytes(eventBytes: event.byteCount, pieces: pieces)
        for result in results {
            let route = result.route
            switch result.outcome {
            case .notifications(let notifications):
                for routed in notifications {
                    let bytes = share.next() + routed.notification.payload.count + Self.pieceOverheadBytes
                    if self.flow.acquireNow(bytes: bytes) != true {
                        // About to wait for room: what is collected must go out first, or nothing frees room.
                        self.send(&sends)
                        guard await self.flow.acquire(bytes: bytes) else { return false }
                    }
                    self.start(
                        Delivery(
                            routed: routed, route: route, app: result.app, event: event, ticket: ticket, bytes: bytes),
                        coalesces: result.coalesces, in: &group, sends: &sends)
                    if sends.count >= Self.sendBatchSize { self.send(&sends) }
                }
            case .deadLetter(let reason):
                // The producer keeps a copy of the dead letter's value until Kafka acknowledges it.
                let bytes = share.next() + (event.value?.count ?? 0) + Self.pieceOverheadBytes
                guard await self.flow.acquire(bytes: bytes) else { return false }
                group.addTask {
                    await self.deadLetter(
                        reason: reason.description, route: route, event: event, ticket: ticket, bytes: bytes)
                }
            }
        }
        return true
    }

    /// What a piece of work holds besides its event and payload: its task, its records and their encoding.
    static let pieceOverheadBytes = 1024

    /// The most notifications collected before they are handed to the sender: enough to wake a connection's
    /// event loop once for many, few enough that the first waits only microseconds for the last to be mapped.
    static let sendBatchSize = 64

    /// Hands the collected notifications to the sender.
    private func send(_ sends: inout [SendRequest]) {
        guard !sends.isEmpty else { return }
        self.sender.send(contentsOf: sends)
        sends.removeAll(keepingCapacity: true)
    }

    // MARK: Delivering one notification

    /// One notification on its way, and what its outcome needs. A class: it is captured by the answer's
    /// callback and read again for the outcome, and copying its ~20 references at each step cost more than
    /// one allocation.
    final class Delivery: Sendable {
        let routed: MappedNotification
        let route: String
        let app: String?
        let event: SourceEvent
        let ticket: Ticket
        /// The room it holds in the line.
        let bytes: Int

        init(routed: MappedNotification, route: String, app: String?, event: SourceEvent, ticket: Ticket, bytes: Int) {
            self.routed = routed
            self.route = route
            self.app = app
            self.event = event
            self.ticket = ticket
            self.bytes = bytes
        }

        var notification: Notification { self.routed.notification }

        /// Its line, when its route orders notifications (`ordering_key`): the route, the key and the destination
        /// (the device token, or a broadcast's channel ID). Made only when needed, so unordered notifications carry
        /// nothing for it.
        var lineKey: LineKey? {
            self.routed.orderingKey.map {
                LineKey(
                    route: self.route, key: $0,
                    destination: self.routed.notification.channelID ?? self.routed.notification.deviceToken)
            }
        }
    }

    /// The line a notification of an ordered route waits in. The destination (device token, or a broadcast's
    /// channel ID) is part of it: order matters per device or channel, and a fan-out event's notifications to
    /// different devices must not wait for one another (nor, with `coalesce`, replace one another).
    struct LineKey: Hashable, Sendable {
        var route: String
        var key: [UInt8]
        var destination: String
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
    }

    /// Starts a delivery. The common case, the line open and the first answer final, runs without a task: the
    /// request joins `sends`, and the answer's thread publishes the outcome; a local fault is published at
    /// once. Anything else (a retry, a halt, a closed gate) goes on in ``deliver(_:machine:action:)`` in a task.
    /// A notification of an ordered route whose line is busy waits in it (see ``lines``) instead.
    private func start(
        _ delivery: Delivery, coalesces: Bool, in group: inout DiscardingTaskGroup, sends: inout [SendRequest]
    ) {
        var machine = DeliveryStateMachine(
            expirationEpochSeconds: delivery.routed.notification.expirationEpochSeconds,
            localFault: delivery.routed.localRejection
                ?? self.validate(delivery.routed.notification, delivery.routed.payloadIsJSONObject, delivery.app),
            maxAttempts: self.configuration.maxAttempts,
            backoff: self.configuration.retryBackoff
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
        let started = ContinuousClock.now
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
        let arrival = self.lines.withLock {
            $0.arrive(WaitingDelivery(delivery: delivery, machine: machine), key: key, coalesce: coalesces)
        }
        switch arrival {
        case .send:
            return true
        case .wait(let replaced):
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
    }

    /// Sends a delivery whose turn came: at once when the gate is open, else in a task; one that expired while it
    /// waited is finished (its line moves on when its hand-over ends).
    private func sendInTurn(_ waiting: WaitingDelivery) {
        let delivery = waiting.delivery
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
    private func runResumptions() async {
        await withDiscardingTaskGroup { group in
            for await resumption in self.resumptions.stream {
                switch resumption {
                case .deliver(let delivery, let machine, let action):
                    group.addTask { await self.deliver(delivery, machine: machine, action: action) }
                case .publish(let record, let acknowledged):
                    group.addTask { await self.publishLater(record, acknowledged: acknowledged) }
                }
            }
        }
    }

    /// Drives a delivery's state machine from `action` to its outcome, waiting where it says.
    private func deliver(
        _ delivery: Delivery, machine: DeliveryStateMachine, action: DeliveryStateMachine.Action
    ) async {
        let notification = delivery.notification
        let app = delivery.app
        var machine = machine
        var action = action
        // The task that closed the gate probes APNs with its own notification and reopens the gate.
        var probing = false
        var probes = 0
        while true {
            switch action {
            case .send:
                if !probing {
                    do {
                        try await self.gate.waitUntilOpen()
                    } catch {
                        return  // cancelled by the drain timeout: stays unfinished, so uncommitted
                    }
                }
                machine.sending(nowEpochMilliseconds: self.epochMilliseconds())
                let started = ContinuousClock.now
                let result = await self.sender.send(notification, app: app)
                if case .answered = result {
                    self.metrics.apnsRequestDuration.recordInterval(since: started)
                }
                action = machine.received(result, nowEpochMilliseconds: self.epochMilliseconds())
                if probing, !action.isHalt {
                    probing = false
                    self.gate.resume()
                }
            case .wait(let delay):
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    return
                }
                action = machine.retryDue(nowEpochMilliseconds: self.epochMilliseconds())
            case .halt(let reason):
                if probing || self.gate.halt(reason: "app \(app ?? "default"): \(reason)") {
                    probing = true
                    probes += 1
                    do {
                        try await Task.sleep(for: self.configuration.haltProbeBackoff.delay(afterAttempt: probes))
                    } catch {
                        return
                    }
                } else {
                    do {
                        try await self.gate.waitUntilOpen()
                    } catch {
                        return
                    }
                }
                action = machine.resumed(nowEpochMilliseconds: self.epochMilliseconds())
            case .finish(let outcome):
                if probing {
                    // Expired while probing: open the gate; the next systemic answer closes it again and
                    // that sender probes.
                    self.gate.resume()
                }
                // The task ends here; the permit stays taken until Kafka acknowledged the records.
                self.finishNow(delivery, outcome: outcome)
                return
            }
        }
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
        // Fields are read through the delivery, not copied out of it: a copy of the notification retains and
        // releases each of its strings, and this runs once per notification.
        let value = OutcomeRecord.encoded(
            notificationID: delivery.routed.notification.apnsID,
            route: delivery.route,
            source: delivery.event.source,
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
            supersededBy: outcome.supersededBy
        )
        let headers = self.recordHeaders(delivery.app)
        let outcomeRecord = OutgoingRecord(
            topic: self.configuration.outcomesTopic,
            key: OutcomeRecord.key(
                deviceToken: delivery.routed.notification.deviceToken,
                channelID: delivery.routed.notification.channelID),
            value: value, headers: headers)
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
                source: delivery.event.source
            )
            invalidTokenRecord = OutgoingRecord(
                topic: self.configuration.invalidTokensTopic, key: invalid.key, value: invalid.encoded(),
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

    private func deadLetter(reason: String, route: String, event: SourceEvent, ticket: Ticket, bytes: Int) async {
        let letter = DeadLetter(
            error: reason, route: route, source: event.source, value: event.value, sourceHeaders: event.headers
        )
        let topic = self.configuration.deadLetterTopic
        let record = letter.record(topic: topic, maxBytes: self.configuration.maxRecordBytes)
        await self.publish(
            record, bytes: bytes, refit: { letter.record(topic: topic, maxBytes: $0) }
        ) { [self] in
            self.metrics.deadLetter(route: route)
            self.pieceFinished(ticket)
        }
        self.logger.debug(
            "Event dead-lettered",
            metadata: [
                "kafka.topic": "\(event.source.topic)", "kafka.partition": "\(event.source.partition)",
                "kafka.offset": "\(event.source.offset)", "pipeline.route": "\(route)",
                "pipeline.error": "\(letter.boundedError)",
            ]
        )
    }

    /// Whether the drain timed out and in-flight work was abandoned.
    var isAbandoned: Bool { self.abandoned.load(ordering: .relaxed) }

    /// Returns a piece's room once its records are acknowledged.
    func releaseRoom(bytes: Int) {
        self.flow.release(bytes: bytes)
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
    fileprivate func recordInterval(since start: ContinuousClock.Instant) {
        self.recordNanoseconds((ContinuousClock.now - start).saturatedNanoseconds)
    }
}
