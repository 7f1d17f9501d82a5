import APNSCore
import CoreMetrics
import struct Foundation.Date
import Logging
import ServiceLifecycle
import Synchronization

/// What the pipeline needs to know beyond its parts (SPEC §2 `kafka`, `apns.retry`, `outcomes`).
public struct PipelineConfiguration: Sendable {
    /// `kafka.max_in_flight`: notifications (and dead letters) between consumption and acknowledgement.
    public var maxInFlight: Int
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

    /// Creates a configuration; the defaults are SPEC §2's.
    public init(
        maxInFlight: Int = 10_000,
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
/// lets the source commit an offset only once everything before it is acknowledged (SPEC §3, §4).
///
/// Every event becomes *pieces* of work: one per notification and one per dead letter. An event is finished
/// when all its pieces' records are acknowledged (or at once when no route matched it); ``PartitionProgress``
/// turns finished events into the offset the source may commit.
public final class Pipeline: Service, Sendable {
    private let source: any EventSource
    private let mapper: any EventMapper
    private let sender: any NotificationSender
    private let sink: any RecordSink
    private let configuration: PipelineConfiguration
    private let metrics: BridgeMetrics
    private let logger: Logger
    private let validate: @Sendable (Notification) -> Reason?
    private let epochMilliseconds: @Sendable () -> Int64

    /// The halt gate: closed while a systemic fault stops the line.
    public let gate: HaltGate
    private let limiter: InFlightLimiter
    private let table = Mutex(PartitionTable())
    private let sourceFailure = Mutex<String?>(nil)
    /// Set when the drain timed out: in-flight work is abandoned (and stays uncommitted), so failed records
    /// are no longer published again.
    private let abandoned = Atomic<Bool>(false)

    /// Creates the pipeline; nothing runs until ``run()``.
    ///
    /// - Parameters:
    ///   - validate: the bridge's own check of a notification before it is sent; a non-`nil` reason
    ///     rejects it with Apple's reason for that fault, without sending.
    ///   - epochMilliseconds: the wall clock, for expiry and record timestamps.
    public init(
        source: any EventSource,
        mapper: any EventMapper,
        sender: any NotificationSender,
        sink: any RecordSink,
        configuration: PipelineConfiguration,
        metrics: BridgeMetrics,
        logger: Logger,
        validate: @escaping @Sendable (Notification) -> Reason? = { _ in nil },
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
        self.epochMilliseconds = epochMilliseconds
        let pauses = PauseControl(source: source)
        self.pauses = pauses
        self.gate = HaltGate { [metrics, logger] halt in
            metrics.halted.record(halt == nil ? 0 : 1)
            if let halt {
                logger.error("Line halted: APNs refuses the provider", metadata: ["halt.reason": "\(halt.reason)"])
                pauses.set(.halt, paused: true)
            } else {
                logger.notice("Line resumed: APNs accepts again")
                pauses.set(.halt, paused: false)
            }
        }
        self.limiter = InFlightLimiter(
            limit: configuration.maxInFlight,
            onFull: { pauses.set(.backpressure, paused: true) },
            onRoom: { pauses.set(.backpressure, paused: false) },
            onChange: { metrics.inFlight.record($0) }
        )
    }

    private let pauses: PauseControl

    /// The system's wall clock in milliseconds since the UNIX epoch.
    public static func systemEpochMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// What `/readyz` says: not ready while halted or after the source failed.
    public var readiness: Readiness {
        if let halt = self.gate.current { return .notReady("halted: \(halt.reason)") }
        if let failure = self.sourceFailure.withLock({ $0 }) { return .notReady("kafka: \(failure)") }
        return .ready
    }

    /// Notifications and dead letters in flight now.
    public var inFlight: Int { self.limiter.inFlight }

    /// Consumes until graceful shutdown (or cancellation), then stops fetching, drains in-flight work for
    /// at most the drain timeout, flushes the sink and closes the source, which commits what finished.
    public func run() async throws {
        let stream = try await self.source.start(listener: Listener(pipeline: self))
        var failure: (any Error)?
        await withDiscardingTaskGroup { group in
            do {
                for try await batch in stream.cancelOnGracefulShutdown() {
                    for event in batch {
                        await self.take(event, in: &group)
                    }
                }
            } catch is CancellationError {
                // Hard cancellation: the drain below ends at once.
            } catch {
                failure = error
                self.sourceFailure.withLock { $0 = "\(error)" }
                self.logger.error("Event source failed", metadata: ["error": "\(error)"])
            }
            self.pauses.set(.shutdown, paused: true)
            let drained = await self.limiter.waitUntilEmpty(timeout: self.configuration.drainTimeout)
            if !drained {
                self.logger.warning(
                    "Drain timeout: abandoning in-flight work, which stays uncommitted",
                    metadata: ["pipeline.in_flight": "\(self.limiter.inFlight)"]
                )
                self.abandoned.store(true, ordering: .relaxed)
                group.cancelAll()
            }
        }
        do {
            try await self.sink.flush(timeout: self.configuration.drainTimeout)
        } catch {
            self.logger.error("Flushing records failed", metadata: ["error": "\(error)"])
        }
        await self.source.close()
        if let failure { throw failure }
    }

    // MARK: Taking events

    private func take(_ event: SourceEvent, in group: inout DiscardingTaskGroup) async {
        self.metrics.eventsConsumed(topic: event.source.topic)
        let results = self.mapper.map(event)
        var pieces = 0
        for result in results {
            switch result {
            case .notifications(_, _, let notifications): pieces += notifications.count
            case .deadLetter: pieces += 1
            }
        }
        guard let ticket = self.begin(event, pieces: pieces) else {
            // The partition was revoked while its events sat in the buffer: another instance owns them now.
            return
        }
        if results.isEmpty {
            self.metrics.eventUnmatched(topic: event.source.topic)
            return
        }
        for result in results {
            switch result {
            case .notifications(let route, let app, let notifications):
                for routed in notifications {
                    await self.limiter.acquire()
                    group.addTask {
                        await self.deliver(routed, route: route, app: app, event: event, ticket: ticket)
                    }
                }
            case .deadLetter(let route, let reason):
                await self.limiter.acquire()
                group.addTask {
                    await self.deadLetter(reason: reason, route: route, event: event, ticket: ticket)
                }
            }
        }
    }

    // MARK: Delivering one notification

    private func deliver(
        _ routed: RoutedNotification, route: String, app: String?, event: SourceEvent, ticket: Ticket
    ) async {
        let notification = routed.notification
        var machine = DeliveryStateMachine(
            expirationEpochSeconds: notification.expirationEpochSeconds,
            localFault: routed.localFault ?? self.validate(notification),
            maxAttempts: self.configuration.maxAttempts,
            backoff: self.configuration.retryBackoff
        )
        var action = machine.start(nowEpochMilliseconds: self.epochMilliseconds())
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
                await self.finish(notification, outcome: outcome, route: route, event: event, ticket: ticket)
                return
            }
        }
    }

    /// Publishes the notification's outcome (and invalid-token record); when Kafka acknowledged them, counts
    /// it and finishes its piece of `ticket`.
    private func finish(
        _ notification: Notification, outcome: DeliveryOutcome, route: String, event: SourceEvent, ticket: Ticket
    ) async {
        let record = OutcomeRecord(
            notificationID: notification.apnsID,
            route: route,
            source: event.source,
            deviceToken: notification.deviceToken,
            apnsTopic: notification.topic,
            pushType: notification.pushType.rawValue,
            priority: notification.priority.rawValue,
            status: outcome.status,
            httpStatus: outcome.httpStatus,
            reason: outcome.reason,
            apnsUniqueID: outcome.apnsUniqueID,
            attempts: outcome.attempts,
            latencyMilliseconds: outcome.firstSentAtEpochMilliseconds.map {
                Double(outcome.completedAtEpochMilliseconds - $0)
            },
            sentAtEpochMilliseconds: outcome.firstSentAtEpochMilliseconds,
            completedAtEpochMilliseconds: outcome.completedAtEpochMilliseconds
        )
        var records = [OutgoingRecord(topic: self.configuration.outcomesTopic, key: record.key, value: record.encoded())]
        if let reason = outcome.invalidTokenReason {
            let invalid = InvalidTokenRecord(
                deviceToken: notification.deviceToken,
                apnsTopic: notification.topic,
                reason: reason,
                invalidSinceEpochMilliseconds: outcome.invalidSinceEpochMilliseconds,
                notificationID: notification.apnsID,
                route: route,
                source: event.source
            )
            records.append(
                OutgoingRecord(topic: self.configuration.invalidTokensTopic, key: invalid.key, value: invalid.encoded())
            )
        }
        await self.publish(records) { [self] in
            if let reason = outcome.invalidTokenReason {
                self.metrics.invalidToken(reason: reason)
            }
            self.metrics.notification(route: route, status: outcome.status, reason: outcome.reason)
            self.pieceFinished(ticket)
        }
        if outcome.status != .delivered {
            self.logger.debug(
                "Notification not delivered",
                metadata: [
                    "apns.token": "\(notification.deviceToken.prefix(8))",
                    "apns.status": "\(outcome.status.rawValue)",
                    "apns.reason": "\(outcome.reason ?? "")",
                    "pipeline.route": "\(route)",
                ]
            )
        }
    }

    private func deadLetter(reason: String, route: String, event: SourceEvent, ticket: Ticket) async {
        let letter = DeadLetter(
            error: reason, route: route, source: event.source, value: event.value, sourceHeaders: event.headers
        )
        let record = OutgoingRecord(
            topic: self.configuration.deadLetterTopic, key: letter.key, value: letter.value, headers: letter.headers
        )
        await self.publish([record]) { [self] in
            self.metrics.deadLetter(route: route)
            self.pieceFinished(ticket)
        }
        self.logger.debug(
            "Event dead-lettered",
            metadata: [
                "kafka.topic": "\(event.source.topic)", "kafka.partition": "\(event.source.partition)",
                "kafka.offset": "\(event.source.offset)", "pipeline.route": "\(route)", "pipeline.error": "\(reason)",
            ]
        )
    }

    /// Hands `records` to the sink and returns without waiting for Kafka. Once every one is acknowledged,
    /// `acknowledged` runs (on the sink's thread), then the piece's permit is returned: marking the piece
    /// first matters, because the drain waits for the permits and must find every finished offset already
    /// stored when it closes the source.
    ///
    /// A record the sink fails is published again after a backoff, until acknowledged: an unacknowledged
    /// record must never let its event be committed. Retries stop once the drain timed out.
    private func publish(_ records: [OutgoingRecord], acknowledged: @escaping @Sendable () -> Void) async {
        let acknowledgedAll: @Sendable () -> Void = { [self] in
            acknowledged()
            self.limiter.release()
        }
        if records.count == 1 {
            await self.publish(records[0], attempt: 0, acknowledged: acknowledgedAll)
            return
        }
        let countdown = Countdown(records.count)
        for record in records {
            await self.publish(record, attempt: 0) {
                if countdown.countDown() { acknowledgedAll() }
            }
        }
    }

    private func publish(_ record: OutgoingRecord, attempt: Int, acknowledged: @escaping @Sendable () -> Void) async {
        await self.sink.publish(record) { [self] error in
            guard let error else { return acknowledged() }
            let attempt = attempt + 1
            self.logger.warning(
                "Publishing a record failed; retrying",
                metadata: ["kafka.topic": "\(record.topic)", "error": "\(error)", "pipeline.attempt": "\(attempt)"]
            )
            Task {
                try? await Task.sleep(for: self.configuration.publishBackoff.delay(afterAttempt: attempt))
                guard !self.abandoned.load(ordering: .relaxed) else { return }
                await self.publish(record, attempt: attempt, acknowledged: acknowledged)
            }
        }
    }

    // MARK: Partition bookkeeping

    /// One event's place in its partition's progress.
    struct Ticket: Sendable {
        var partition: PartitionID
        var offset: Int64
        var generation: UInt64
    }

    struct PartitionState {
        var generation: UInt64
        var progress = PartitionProgress()
        /// Pieces still outstanding per unfinished offset.
        var outstanding: [Int64: Int] = [:]
    }

    struct PartitionTable {
        var partitions: [PartitionID: PartitionState] = [:]
        var nextGeneration: UInt64 = 1
    }

    /// Registers `event` with `pieces` pieces of work; `nil` when its partition is not assigned here.
    private func begin(_ event: SourceEvent, pieces: Int) -> Ticket? {
        let partition = event.partition
        let offset = event.source.offset
        return self.table.withLock { table in
            guard var state = table.partitions[partition] else { return nil }
            state.progress.begin(offset: offset)
            if pieces == 0 {
                if state.progress.finish(offset: offset), let commit = state.progress.commitOffset {
                    self.source.markFinished(partition, nextOffset: commit)
                }
            } else {
                state.outstanding[offset] = pieces
            }
            table.partitions[partition] = state
            return Ticket(partition: partition, offset: offset, generation: state.generation)
        }
    }

    /// One piece of the ticket's event is acknowledged.
    ///
    /// The new commit position is handed to the source *inside* the lock: pieces finish on many threads, and
    /// two positions handed over outside it could arrive in the wrong order, storing an older offset last
    /// (librdkafka stores whatever it is given).
    private func pieceFinished(_ ticket: Ticket) {
        self.table.withLock { table in
            guard var state = table.partitions[ticket.partition], state.generation == ticket.generation,
                let left = state.outstanding[ticket.offset]
            else { return }
            if left > 1 {
                state.outstanding[ticket.offset] = left - 1
            } else {
                state.outstanding[ticket.offset] = nil
                if state.progress.finish(offset: ticket.offset), let commit = state.progress.commitOffset {
                    self.source.markFinished(ticket.partition, nextOffset: commit)
                }
            }
            table.partitions[ticket.partition] = state
        }
    }

    fileprivate func assigned(_ partitions: [PartitionID]) {
        self.table.withLock { table in
            for partition in partitions where table.partitions[partition] == nil {
                table.partitions[partition] = PartitionState(generation: table.nextGeneration)
                table.nextGeneration += 1
            }
        }
        self.pauses.assigned(partitions)
        self.logger.info("Partitions assigned", metadata: ["kafka.partitions": "\(partitions)"])
    }

    fileprivate func revoked(_ partitions: [PartitionID]) async {
        let deadline = ContinuousClock.now + self.configuration.drainTimeout
        while ContinuousClock.now < deadline {
            let busy = self.table.withLock { table in
                partitions.contains { (table.partitions[$0]?.progress.unfinishedCount ?? 0) > 0 }
            }
            if !busy { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let abandoned = self.table.withLock { table in
            partitions.reduce(0) { sum, partition in
                sum + (table.partitions.removeValue(forKey: partition)?.progress.unfinishedCount ?? 0)
            }
        }
        self.pauses.revoked(partitions)
        if abandoned > 0 {
            self.logger.warning(
                "Revoked partitions still had unfinished events; they stay uncommitted",
                metadata: ["kafka.partitions": "\(partitions)", "pipeline.unfinished": "\(abandoned)"]
            )
        } else {
            self.logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(partitions)"])
        }
    }

    private struct Listener: RebalanceListener {
        let pipeline: Pipeline

        func partitionsAssigned(_ partitions: [PartitionID]) async {
            self.pipeline.assigned(partitions)
        }

        func partitionsRevoked(_ partitions: [PartitionID]) async {
            await self.pipeline.revoked(partitions)
        }
    }
}

extension DeliveryStateMachine.Action {
    fileprivate var isHalt: Bool {
        if case .halt = self { return true }
        return false
    }
}

/// Why fetching is paused. Fetching resumes only when no reason is left, so a backpressure "room" during a
/// halt does not restart consumption.
enum PauseReason: Hashable, Sendable {
    case backpressure
    case halt
    case shutdown
}

/// Pauses and resumes every assigned partition as pause reasons come and go.
final class PauseControl: Sendable {
    private struct State {
        var reasons: Set<PauseReason> = []
        var assigned: Set<PartitionID> = []
    }

    private let source: any EventSource
    private let state = Mutex(State())

    init(source: any EventSource) {
        self.source = source
    }

    /// Adds or removes a reason to pause. The source is told inside the lock: callers run on different
    /// threads (the in-flight limiter fills on the consuming task and empties on the producer's delivery
    /// reports), and a pause and a resume told in the other order than decided would leave the partitions
    /// paused with no reason left to resume them. Pausing and resuming only flag partitions in librdkafka.
    func set(_ reason: PauseReason, paused: Bool) {
        self.state.withLock { state in
            let wasPaused = !state.reasons.isEmpty
            if paused { state.reasons.insert(reason) } else { state.reasons.remove(reason) }
            let isPaused = !state.reasons.isEmpty
            guard wasPaused != isPaused, !state.assigned.isEmpty else { return }
            let partitions = Array(state.assigned)
            if isPaused { self.source.pause(partitions) } else { self.source.resume(partitions) }
        }
    }

    /// Newly assigned partitions are paused or resumed to match the reasons now: librdkafka keeps a
    /// partition's pause flag across revocation and reassignment, so one paused when it was revoked would
    /// otherwise come back paused with no reason left to resume it.
    func assigned(_ partitions: [PartitionID]) {
        self.state.withLock { state in
            state.assigned.formUnion(partitions)
            if state.reasons.isEmpty { self.source.resume(partitions) } else { self.source.pause(partitions) }
        }
    }

    func revoked(_ partitions: [PartitionID]) {
        self.state.withLock { state in state.assigned.subtract(partitions) }
    }
}

extension Timer {
    /// Records the time since `start`.
    fileprivate func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        self.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// Counts acknowledgements down to zero from any thread.
private final class Countdown: Sendable {
    private let remaining: Atomic<Int>

    init(_ count: Int) {
        self.remaining = Atomic(count)
    }

    /// Counts one down; `true` for the one that reached zero.
    func countDown() -> Bool {
        self.remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
    }
}
