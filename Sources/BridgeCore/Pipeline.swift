import APNSCore
import CoreMetrics
import Logging
import Routing
import ServiceLifecycle
import Synchronization
import Waiting

import struct Foundation.Date

/// What the pipeline needs to know beyond its parts (docs/configuration.md: `kafka`, `apns.retry`, `outcomes`).
package struct PipelineConfiguration: Sendable {
    /// `kafka.max_in_flight`: notifications (and dead letters) between consumption and acknowledgement.
    package var maxInFlight: Int
    /// `kafka.max_in_flight_bytes`: the bytes those pieces of work hold (their events, payloads and records).
    package var maxInFlightBytes: Int
    /// The largest record the producer takes (`message.max.bytes`): larger dead letters are truncated to fit.
    package var maxRecordBytes: Int
    /// `outcomes.publish_stall_timeout`: a record Kafka has not acknowledged for this long makes `/readyz`
    /// fail.
    package var publishStallTimeout: Duration
    /// `apns.retry.max_attempts`: sends per notification for retryable answers (at start; a reload replaces it
    /// through ``Pipeline/reload(_:)``).
    package var maxAttempts: Int
    /// `apns.retry.initial_backoff` / `max_backoff`: waits between retryable attempts (at start, like
    /// ``maxAttempts``).
    package var retryBackoff: Backoff
    /// Waits between probes while the line is halted.
    package var haltProbeBackoff: Backoff
    /// Waits between attempts to publish a record Kafka did not acknowledge.
    package var publishBackoff: Backoff
    /// The most notifications one ordered line may hold waiting behind its one in flight. An event that would add
    /// to a line at this depth holds back its partition alone (``Pipeline/park(_:behind:in:)``) until the line is down
    /// to half of it, so that a hot key never holds up the other partitions.
    package var maxWaitingPerKey: Int
    /// How long shutdown waits for in-flight work before abandoning it (uncommitted).
    package var drainTimeout: Duration
    /// How long a revocation waits for the revoked partitions' work in flight before abandoning it (uncommitted).
    package var rebalanceDrainTimeout: Duration
    /// How long shutdown waits, after the drain, for the sink to deliver what it still holds (records of abandoned
    /// work, which stays uncommitted either way): one of the steps whose bounds add up to the margin past
    /// ``drainTimeout`` within which a shutdown ends.
    package var flushTimeout: Duration
    /// `outcomes.topic`.
    package var outcomesTopic: String
    /// `outcomes.invalid_tokens_topic`.
    package var invalidTokensTopic: String
    /// `outcomes.dead_letter_topic`.
    package var deadLetterTopic: String
    /// `outcomes.key`: the Kafka key of outcome and invalid-token records.
    package var outcomeKey: OutcomeKey
    /// `outcomes.forward_headers`: the source headers every record of an event carries.
    package var forwardHeaders: HeaderForwarding
    /// `lanes:`: every lane's bounds, the default lane's (`default`, of routes without `lane:`) among them; empty
    /// without lanes, where the pipeline has one line bounded by ``maxInFlight`` and ``maxInFlightBytes`` (``Lanes``).
    package var lanes: [LaneSpec]

    /// Creates a configuration; the defaults are those of docs/configuration.md.
    package init(
        maxInFlight: Int = 10_000,
        maxInFlightBytes: Int = 64 << 20,
        maxRecordBytes: Int = 1_000_000,
        publishStallTimeout: Duration = .seconds(60),
        maxAttempts: Int = 5,
        retryBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(300)),
        haltProbeBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(60)),
        publishBackoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10)),
        maxWaitingPerKey: Int = 100,
        drainTimeout: Duration = .seconds(30),
        rebalanceDrainTimeout: Duration? = nil,
        flushTimeout: Duration = .seconds(2),
        outcomesTopic: String = "pushbridge.outcomes",
        invalidTokensTopic: String = "pushbridge.invalid-tokens",
        deadLetterTopic: String = "pushbridge.dead-letters",
        outcomeKey: OutcomeKey = .deviceToken,
        forwardHeaders: HeaderForwarding = HeaderForwarding(),
        lanes: [LaneSpec] = []
    ) {
        self.maxInFlight = maxInFlight
        self.maxInFlightBytes = maxInFlightBytes
        self.maxRecordBytes = maxRecordBytes
        self.publishStallTimeout = publishStallTimeout
        self.maxAttempts = maxAttempts
        self.retryBackoff = retryBackoff
        self.haltProbeBackoff = haltProbeBackoff
        self.publishBackoff = publishBackoff
        self.maxWaitingPerKey = max(1, maxWaitingPerKey)
        self.drainTimeout = drainTimeout
        self.rebalanceDrainTimeout = rebalanceDrainTimeout ?? drainTimeout
        self.flushTimeout = flushTimeout
        self.outcomesTopic = outcomesTopic
        self.invalidTokensTopic = invalidTokensTopic
        self.deadLetterTopic = deadLetterTopic
        self.outcomeKey = outcomeKey
        self.forwardHeaders = forwardHeaders
        self.lanes = lanes
    }
}

/// The bridge: takes events from a source, maps them, sends the notifications, publishes what happened, and
/// lets the source commit an offset only once everything before it is acknowledged (docs/data-contract.md, docs/operations.md "Guarantees").
///
/// Every event becomes *pieces* of work: one per notification and one per dead letter. An event is finished
/// when all its pieces' records are acknowledged (or at once when no route matched it); ``PartitionProgress``
/// turns finished events into the offset the source may commit.
package final class Pipeline: Service, Sendable {
    let source: any EventSource
    /// The mapper and the retry policy: what a configuration reload replaces (``reload(_:)``).
    let live: Mutex<LiveSettings>
    let sender: any NotificationSender
    let sink: any RecordSink
    let configuration: PipelineConfiguration
    let metrics: BridgeMetrics
    let logger: Logger
    let validate: @Sendable (Notification, _ payloadIsJSONObject: Bool, _ app: String?) -> Reason?
    let recordHeaders: @Sendable (_ app: String?) -> [(String, [UInt8]?)]
    let epochMilliseconds: @Sendable () -> Int64

    /// The halt gate: closed while a systemic fault stops the line.
    package let gate: HaltGate
    let flow: FlowController
    /// The lanes, when `lanes:` names any: each piece takes room in its route's lane instead of ``flow``
    /// (``room(bytes:in:waits:ticket:claim:sends:)``).
    let lanes: Lanes?
    /// Records Kafka failed and that are being published again.
    package let unpublished = UnpublishedRecords()
    let table = AsyncCondition(PartitionTable())
    private let sourceFailure = Mutex<String?>(nil)
    /// Set when the drain timed out: in-flight work is abandoned (and stays uncommitted), so failed records
    /// are no longer published again.
    private let abandoned = Atomic<Bool>(false)
    /// Work that began without a task (a notification sent from the consuming task, answered on the sender's
    /// thread) and must now wait for something: a retry's backoff, the halt gate, room in the producer.
    /// ``run()`` gives each a task in its task group, so the drain's cancellation reaches them.
    let resumptions = AsyncStream<Resumption>.makeStream()
    /// The per-key lines of routes with `ordering_key`; notifications of other routes never touch it.
    let lines = Mutex(OrderingStateMachine<LineKey, WaitingDelivery>())
    /// Partitions held back behind a hot ordered key, with their events in order (see ``park(_:behind:in:)``).
    let parking = AsyncCondition(Parking())
    /// How many partitions ``parking`` holds: the consume loop looks into ``parking`` only while some are.
    let parkedCount = Atomic<Int>(0)
    /// Revocations begun so far. A ticket remembers the count when its event began, so a notification can tell with
    /// one load that no revocation came since, and only otherwise asks the table whether its partition still counts
    /// (``isCurrent(_:)``).
    let revocations = Atomic<UInt64>(0)

    /// Creates the pipeline; nothing runs until ``run()``.
    ///
    /// - Parameters:
    ///   - validate: the bridge's own check of a notification before it is sent; a non-`nil` reason
    ///     rejects it with Apple's reason for that fault, without sending.
    ///   - recordHeaders: the Kafka headers of the outcome and invalid-token records of a notification for `app`
    ///     (``RecordHeader``).
    ///   - epochMilliseconds: the wall clock, for expiry and record timestamps.
    package init(
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
        self.live = Mutex(
            LiveSettings(
                mapper: mapper, maxAttempts: configuration.maxAttempts, retryBackoff: configuration.retryBackoff))
        self.sender = sender
        self.sink = sink
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.validate = validate
        self.recordHeaders = recordHeaders
        self.epochMilliseconds = epochMilliseconds
        // With lanes, the pieces take room in their lanes only; the line then pauses for halts and shutdown alone.
        self.lanes = Lanes(configuration.lanes, source: source, metrics: metrics)
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
    package static func systemEpochMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// What `/readyz` says: not ready while halted, after the source failed, or while a record could not be
    /// published for longer than `outcomes.publish_stall_timeout`.
    package var readiness: Readiness {
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
    package var inFlight: Int { self.lanes?.inFlight.count ?? self.flow.inFlight.count }

    /// The bytes those hold.
    package var inFlightBytes: Int { self.lanes?.inFlight.bytes ?? self.flow.inFlight.bytes }

    /// Consumes until graceful shutdown (or cancellation), then stops fetching, drains in-flight work for
    /// at most the drain timeout, flushes the sink (at most the flush timeout) and closes the source, which commits what finished.
    package func run() async throws {
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
                        // By index: the iterator copied each event (a retain and a release of each of its parts).
                        for index in batch.indices {
                            guard await self.takeInOrder(batch[index], in: &group, sends: &sends) else {
                                break batches
                            }
                        }
                        self.send(&sends)
                    }
                } onGracefulShutdown: {
                    self.stopWaitingForRoom()
                }
            } catch is CancellationError {
                // Hard cancellation: the drain below ends at once.
            } catch {
                failure = error
                self.sourceFailure.withLock { $0 = "\(error)" }
                self.logger.error("Event source failed", error: error)
            }
            self.stopWaitingForRoom()
            // Held-back partitions take nothing more: their events stay uncommitted.
            self.parking.withLock { $0.stopping = true }
            let drained = await self.waitUntilEmpty(timeout: self.configuration.drainTimeout)
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
            try await self.sink.flush(timeout: self.configuration.flushTimeout)
        } catch {
            self.logger.error("Flushing records failed", error: error)
        }
        await self.source.close()
        if let failure { throw failure }
    }

    // MARK: Taking events

    /// Takes `event` from the consume loop: queued behind its partition's held-back events when there are any,
    /// held back itself when one of its ordered lines is full (``park(_:behind:in:)``), taken otherwise. Returns
    /// `false` when shutdown (or cancellation) ended a wait for room.
    private func takeInOrder(
        _ event: SourceEvent, in group: inout DiscardingTaskGroup, sends: inout [SendRequest]
    ) async -> Bool {
        if self.parkedCount.load(ordering: .relaxed) > 0, self.queueIfHeldBack(event) { return true }
        // With lanes the consume loop never waits for room: a partition whose event finds its lane full waits alone.
        switch await self.take(event, waits: self.lanes == nil, in: &group, sends: &sends) {
        case .taken: return true
        case .stopped: return false
        case .lineFull(let key):
            self.send(&sends)
            self.park(event, behind: key, in: &group)
            return true
        case .laneFull(let lane, let rest):
            self.send(&sends)
            self.holdBack(rest, for: lane, in: &group)
            return true
        }
    }

    /// What ``take(_:in:sends:)`` did.
    enum Taken {
        case taken
        /// Shutdown (or cancellation) ended a wait for room: the event stays unfinished, so uncommitted.
        case stopped
        /// Nothing was done: the event would add to this ordered line, which holds ``PipelineConfiguration/maxWaitingPerKey``.
        case lineFull(LineKey)
        /// The event began, but the lane of its next piece has no room now, and the caller must not wait: these
        /// pieces are not started yet (never when the caller waits).
        case laneFull(Lane, PiecesToStart)
    }

    /// Maps `event` and starts its pieces, unless one of its ordered lines is full (then nothing is done).
    ///
    /// Notifications that can be sent at once are collected in `sends` and handed to the sender together, at
    /// most ``sendBatchSize`` at a time, at the end of each batch of events and before any wait for room: one
    /// hand-over to a connection wakes its event loop once for all of them.
    ///
    /// `waits`: whether a piece waits for room in its lane; when not, a full lane ends the call with the pieces
    /// still to start (``Taken/laneFull(_:_:)``).
    func take(
        _ event: SourceEvent, waits: Bool = true, claim: HoldClaim? = nil, in group: inout DiscardingTaskGroup,
        sends: inout [SendRequest]
    ) async -> Taken {
        // One read per event: a reload takes effect from the next event on.
        let live = self.live.withLock { $0 }
        let results = live.mapper.map(event)
        if let full = self.fullLine(of: results) { return .lineFull(full) }
        self.metrics.eventsConsumed(topic: event.source.topic)
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
            return .taken
        }
        if results.isEmpty {
            self.metrics.eventUnmatched(topic: event.source.topic)
            return .taken
        }
        // The event's bytes are shared out among its pieces, so room for all of them is released once every
        // piece is acknowledged; each piece adds what it holds itself.
        var rest = PiecesToStart(
            event: event, ticket: ticket, results: results[...],
            share: PieceBytes(eventBytes: event.byteCount, pieces: pieces),
            forwarded: self.forwardedHeaders(of: event), maxAttempts: live.maxAttempts, retryBackoff: live.retryBackoff)
        return await self.start(&rest, waits: waits, claim: claim, in: &group, sends: &sends)
    }

    /// Starts the pieces of a begun event that `rest` holds, each once it has room
    /// (``room(bytes:in:waits:ticket:claim:sends:)``). Without `waits`, stops at the first piece whose lane is full
    /// and returns the pieces left.
    func start(
        _ rest: inout PiecesToStart, waits: Bool, claim: HoldClaim? = nil, in group: inout DiscardingTaskGroup,
        sends: inout [SendRequest]
    ) async -> Taken {
        let ticket = rest.ticket
        // The mapping is read in place, each part once: a copy of it retained and released every part, twice.
        while let first = rest.results.indices.first {
            let route = rest.results[first].route
            let app = rest.results[first].app
            let coalesces = rest.results[first].coalesces
            let lane = self.lanes?.lane(named: rest.results[first].lane)
            let extras = RecordExtras.of(
                rest.results[first], forwarded: rest.forwarded, key: self.configuration.outcomeKey)
            switch rest.results[first].outcome {
            case .notifications(let notifications):
                let extraBytes = extras?.recordBytes ?? 0
                while rest.next < notifications.count {
                    let routed = notifications[rest.next]
                    var share = rest.share
                    let bytes =
                        share.next() + routed.notification.payload.count + Self.pieceOverheadBytes + extraBytes
                    let room = await self.room(
                        bytes: bytes, in: lane, waits: waits, ticket: ticket, claim: claim, sends: &sends)
                    if let stop = room.stop(rest) { return stop }
                    rest.share = share
                    rest.next += 1
                    self.start(
                        Delivery(
                            routed: routed, route: route, app: app, event: rest.event, ticket: ticket, bytes: bytes,
                            extras: extras, lane: lane),
                        coalesces: coalesces, retry: (rest.maxAttempts, rest.retryBackoff), in: &group,
                        sends: &sends)
                    if sends.count >= Self.sendBatchSize { self.send(&sends) }
                }
            case .deadLetter(let reason):
                // The producer keeps a copy of the dead letter's value until Kafka acknowledges it.
                let event = rest.event
                var share = rest.share
                let bytes = share.next() + (event.value?.count ?? 0) + Self.pieceOverheadBytes
                let room = await self.room(
                    bytes: bytes, in: lane, waits: waits, ticket: ticket, claim: claim, sends: &sends)
                if let stop = room.stop(rest) { return stop }
                rest.share = share
                group.addTask {
                    await self.deadLetter(
                        reason: reason.description, route: route, event: event, ticket: ticket, bytes: bytes,
                        extras: extras, lane: lane)
                }
            }
            rest.results.removeFirst()
            rest.next = 0
        }
        return .taken
    }

    /// What a piece of work holds besides its event and payload: its task, its records and their encoding.
    static let pieceOverheadBytes = 1024

    /// The most notifications collected before they are handed to the sender: enough to wake a connection's
    /// event loop once for many, few enough that the first waits only microseconds for the last to be mapped.
    static let sendBatchSize = 64

    /// Hands the collected notifications to the sender.
    func send(_ sends: inout [SendRequest]) {
        guard !sends.isEmpty else { return }
        // Handed over whole (the sender takes it as `consuming`, and `consume` ends this function's hold on it): a
        // sender that rewrites the batch (a reload's in-flight count) then owns it alone, where a shared array would
        // be copied, a retain per field per notification. Without `consume` the local kept a reference through the
        // call, and `ReloadableSender` copied every batch.
        var batch: [SendRequest] = []
        batch.reserveCapacity(Self.sendBatchSize)
        swap(&batch, &sends)
        self.sender.send(contentsOf: consume batch)
    }

    private func deadLetter(
        reason: String, route: String, event: SourceEvent, ticket: Ticket, bytes: Int, extras: RecordExtras?,
        lane: Lane?
    ) async {
        let letter = DeadLetter(
            error: reason, route: route, source: event.source, value: event.value, sourceHeaders: event.headers,
            context: extras?.context, forwardedHeaders: extras?.forwarded ?? []
        )
        let topic = self.configuration.deadLetterTopic
        let record = letter.record(topic: topic, maxBytes: self.configuration.maxRecordBytes)
        await self.publish(
            record, bytes: bytes, lane: lane, refit: { letter.record(topic: topic, maxBytes: $0) }
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

    /// Returns a piece's room once its records are acknowledged: its bytes, and its place in the count unless it
    /// gave that back while it waited in an ordered line (`places` 0); in its lane, with lanes.
    func releaseRoom(bytes: Int, places: Int = 1, lane: Lane? = nil) {
        (lane?.flow ?? self.flow).release(bytes: bytes, count: places)
    }
}
