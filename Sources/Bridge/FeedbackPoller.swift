import APNSClient
import BinaryProvider
import BridgeCore
import Configuration
import EgressProxy
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Waiting

/// Polls one binary app's feedback service (docs/binary-protocol.md): at start and then every `interval`, it
/// reads the service's tuples until the service closes the connection and publishes one invalid-token record
/// (`pushbridge.invalid-token.v2`, reason `Unregistered`, the tuple's time as `invalid_since`, no source event)
/// per tuple, with the header `pushbridge-protocol: binary`.
///
/// Feedback records belong to no consumed event, so they take no part in offset commits; a poll counts as done
/// only once Kafka acknowledged every record it made (records Kafka fails are published again after a backoff,
/// and no new poll starts meanwhile). A poll that cannot connect is logged and made again at the next interval; it
/// never halts the line. ``FeedbackPollers`` runs them.
package struct FeedbackPoller: Sendable {
    /// What one poll did.
    package struct Summary: Sendable, Hashable {
        /// Tuples read from the service.
        package var read = 0
        /// Invalid-token records Kafka acknowledged.
        package var published = 0
        /// Tuples skipped because their token is not 32 bytes.
        package var skipped = 0
        /// How reading ended; `nil` when the service could not be polled.
        package var end: FeedbackPoll.End?
        /// Why the service could not be polled.
        package var failure: String?
    }

    /// The app's name in metrics and logs (`default` for the `apns` block).
    package let app: String
    private let client: FeedbackClient
    private let apnsTopic: String
    private let interval: Duration
    private let sink: any RecordSink
    private let invalidTokensTopic: String
    private let metrics: BridgeMetrics
    private let logger: Logger
    private let publishBackoff: Backoff

    /// Creates a poller of `client` whose records carry `apnsTopic` and go to `invalidTokensTopic` through `sink`.
    package init(
        app: String, client: FeedbackClient, apnsTopic: String, interval: Duration, sink: any RecordSink,
        invalidTokensTopic: String, metrics: BridgeMetrics, logger: Logger,
        publishBackoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(30))
    ) {
        self.app = app
        self.client = client
        self.apnsTopic = apnsTopic
        self.interval = interval
        self.sink = sink
        self.invalidTokensTopic = invalidTokensTopic
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "apns.app"] = "\(app)"
        self.logger = logger
        self.publishBackoff = publishBackoff
    }

    /// One poller per app with `protocol: binary` whose `binary.feedback.enabled` holds. Throws a
    /// ``CredentialError`` naming the file when an app's certificate or CA file does not load.
    package static func pollers(
        for configuration: BridgeConfiguration, sink: any RecordSink, metrics: BridgeMetrics, logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> [FeedbackPoller] {
        try configuration.feedbackApps.map { app in
            let settings = app.settings
            let feedback = settings.binary.feedback
            guard case .certificate(let credentials) = try APNSSender.clientConfiguration(settings).authentication
            else {
                throw CredentialError(
                    code: .invalidCertificate, file: "",
                    cause: "the binary protocol takes certificate authentication only")
            }
            let endpoint = feedback.endpoint ?? FeedbackSettings.appleFeedback(settings.environment)
            var client = FeedbackClientConfiguration(host: endpoint.host, port: endpoint.port, credentials: credentials)
            client.additionalTrustRootsPEMFile = settings.caFile
            client.proxy = settings.proxy.proxy(forHost: endpoint.host)
            client.timeout = feedback.timeout
            return FeedbackPoller(
                app: app.name ?? "default",
                client: try FeedbackClient(configuration: client, eventLoopGroup: eventLoopGroup),
                // Configuration refuses a feedback app whose topic it cannot tell (checkFeedbackTopics).
                apnsTopic: configuration.feedbackTopic(app: app.name) ?? "",
                interval: feedback.interval, sink: sink, invalidTokensTopic: configuration.outcomes.invalidTokens,
                metrics: metrics, logger: logger)
        }
    }

    /// Polls at once and then every `interval` until `stop` is set (after the poll in progress published what it
    /// read) or the task is cancelled.
    func run(until stop: AsyncCondition<Bool>) async {
        while !Task.isCancelled {
            _ = await self.pollOnce()
            if await stop.waitUntilSet(deadline: .now + self.interval) { return }
        }
    }

    /// Polls the service once and publishes what it reported; returns once Kafka acknowledged every record (or
    /// the task was cancelled).
    package func pollOnce() async -> Summary {
        var summary = Summary()
        let poll: FeedbackPoll
        do {
            poll = try await self.client.poll()
        } catch {
            guard !Task.isCancelled else { return summary }
            summary.failure = error.reason
            self.metrics.feedbackPollFailed(app: self.app)
            self.logger.warning(
                "Polling the feedback service failed; trying again at the next interval",
                error: error, metadata: ["feedback.endpoint": "\(self.client.endpoint)"])
            return summary
        }
        summary.read = poll.tuples.count
        summary.end = poll.end
        var tuples: [FeedbackTuple] = []
        tuples.reserveCapacity(poll.tuples.count)
        for tuple in poll.tuples {
            guard tuple.token.count == BinaryFrame.deviceTokenBytes else {
                summary.skipped += 1
                // The first few are logged one by one, the rest only counted: a service may send thousands.
                guard summary.skipped <= Self.skippedTokensLogged else { continue }
                self.logger.warning(
                    "The feedback service reported a token that is not 32 bytes; skipped",
                    metadata: [
                        "apns.token": "\(tuple.deviceToken.prefix(8))", "feedback.token_bytes": "\(tuple.token.count)",
                    ])
                continue
            }
            tuples.append(tuple)
        }
        if summary.skipped > 0 { self.metrics.feedbackTokenSkipped(app: self.app, count: summary.skipped) }
        if summary.skipped > Self.skippedTokensLogged {
            self.logger.warning(
                "More feedback tokens were not 32 bytes; skipped",
                metadata: ["feedback.skipped": "\(summary.skipped - Self.skippedTokensLogged)"])
        }
        if poll.end != .closed && poll.end != .cancelled {
            self.metrics.feedbackPollFailed(app: self.app)
            self.logger.warning(
                "The feedback service's answer ended early; what arrived whole is published",
                metadata: [
                    "feedback.endpoint": "\(self.client.endpoint)", "feedback.end": "\(poll.end)",
                    "feedback.tuples": "\(poll.tuples.count)", "feedback.bytes": "\(poll.bytesRead)",
                ])
        }
        summary.published = await self.publish(tuples)
        if summary.published > 0 {
            self.metrics.feedbackTokensPublished(app: self.app, count: summary.published)
            self.metrics.invalidToken(reason: "Unregistered", count: summary.published)
        }
        // Info only when there was something: an empty poll every interval is routine.
        self.logger.log(
            level: summary.read > 0 ? .info : .debug,
            "Polled the feedback service",
            metadata: [
                "feedback.endpoint": "\(self.client.endpoint)", "feedback.tuples": "\(summary.read)",
                "feedback.published": "\(summary.published)", "feedback.skipped": "\(summary.skipped)",
            ])
        return summary
    }

    /// How many skipped tokens of one poll are logged one by one.
    static let skippedTokensLogged = 5

    /// The invalid-token record for one tuple.
    func record(for tuple: FeedbackTuple) -> OutgoingRecord {
        let record = InvalidTokenRecordV2(
            deviceToken: tuple.deviceToken, apnsTopic: self.apnsTopic, reason: "Unregistered",
            invalidSinceEpochMilliseconds: Int64(tuple.timeEpochSeconds) * 1000)
        return OutgoingRecord(
            topic: self.invalidTokensTopic, key: record.key, value: record.encoded(),
            headers: RecordHeader.headers(for: .binary))
    }

    /// Publishes a record per tuple until Kafka acknowledged each (those it fails are published again after a
    /// backoff); returns how many were acknowledged. Records are made as they are handed over, so a poll holds its
    /// tuples and not their records too. On cancellation (shutdown) it stops waiting: what was handed over is
    /// flushed by the producer's close, which comes after the pollers stopped.
    private func publish(_ tuples: [FeedbackTuple]) async -> Int {
        var pending = tuples
        var published = 0
        var attempt = 0
        while !pending.isEmpty {
            let acknowledgements = Acknowledgements(count: pending.count)
            for (index, tuple) in pending.enumerated() {
                await self.sink.publish(self.record(for: tuple)) { error in acknowledgements.answer(index, error: error)
                }
            }
            let answers = await acknowledgements.wait()
            published += answers.acknowledged
            guard !answers.failed.isEmpty, !Task.isCancelled else { break }
            attempt += 1
            self.metrics.feedbackPollFailed(app: self.app)
            self.logger.warning(
                "Kafka failed feedback records; publishing them again", error: answers.error,
                metadata: [
                    "kafka.topic": "\(self.invalidTokensTopic)", "feedback.records": "\(answers.failed.count)",
                    "pipeline.attempt": "\(attempt)",
                ])
            try? await Task.sleep(for: self.publishBackoff.delay(afterAttempt: attempt))
            pending = answers.failed.map { pending[$0] }
        }
        return published
    }
}

/// Collects a sink's answers for a batch of records, and wakes the one waiter when every record was answered
/// (or the waiting task was cancelled).
final class Acknowledgements: Sendable {
    struct Answers: Sendable {
        var acknowledged = 0
        /// The indices of the records the sink failed.
        var failed: [Int] = []
        /// The last failure.
        var error: (any Error)?
    }

    private struct State {
        var remaining: Int
        var answers = Answers()
    }

    private let state: AsyncCondition<State>

    init(count: Int) {
        self.state = AsyncCondition(State(remaining: count))
    }

    /// The sink answered record `index`.
    func answer(_ index: Int, error: (any Error)?) {
        self.state.withLock { state in
            if let error {
                state.answers.failed.append(index)
                state.answers.error = error
            } else {
                state.answers.acknowledged += 1
            }
            state.remaining -= 1
        }
    }

    /// Waits until every record was answered, or the task is cancelled; returns the answers so far.
    func wait() async -> Answers {
        _ = await self.state.wait { $0.remaining <= 0 ? () : nil }
        return self.state.read { $0.answers }
    }
}

/// Every binary app's feedback poller, as one service. A reload that changes what they use replaces them all
/// (``replace(with:)``): each poller replaced stops once its poll in progress published what it read (a feedback
/// service reports a token once, so a poll is never cut short), and the new ones poll at once.
package final class FeedbackPollers: Service, Sendable {
    private let initial: [FeedbackPoller]
    private let replacements: AsyncStream<[FeedbackPoller]>
    private let continuation: AsyncStream<[FeedbackPoller]>.Continuation
    /// Makes the pollers of a configuration, as at start (``FeedbackPoller/pollers(for:sink:metrics:logger:eventLoopGroup:)``).
    package let make: @Sendable (BridgeConfiguration) throws -> [FeedbackPoller]

    /// Runs `pollers`; `make` builds those of a reloaded configuration.
    package init(
        _ pollers: [FeedbackPoller],
        make: @escaping @Sendable (BridgeConfiguration) throws -> [FeedbackPoller] = { _ in [] }
    ) {
        self.initial = pollers
        self.make = make
        (self.replacements, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    /// Stops the pollers running now after their poll in progress, and starts `pollers`.
    package func replace(with pollers: [FeedbackPoller]) {
        self.continuation.yield(pollers)
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                func start(_ pollers: [FeedbackPoller]) -> AsyncCondition<Bool> {
                    let stop = AsyncCondition(false)
                    for poller in pollers {
                        group.addTask { await poller.run(until: stop) }
                    }
                    return stop
                }
                var stop = start(self.initial)
                for await pollers in self.replacements {
                    stop.set()
                    stop = start(pollers)
                }
                // Cancelled (a graceful shutdown): the pollers, which inherit it, stop at once.
            }
        }
    }
}
