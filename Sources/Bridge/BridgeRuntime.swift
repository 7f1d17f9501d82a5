import APNSCore
import BridgeCore
import Configuration
import CoreMetrics
import Kafka
import Logging
import Prometheus
import Routing
import ServiceLifecycle
import Synchronization
import UnixSignals
import Waiting

/// Everything `pushbridge run` runs, built from a loaded configuration: the Kafka clients (or the embedded
/// cluster), the sender, the pipeline and the admin server, in one `ServiceGroup`.
///
/// Services start in this order and stop in reverse: admin server, producer, feedback pollers (binary apps),
/// sender, pipeline (the consumer), lag reporter, periodic commits. So on SIGTERM the consumer stops and drains
/// first, then the sender closes its connections, then the feedback pollers stop (a poll in progress is
/// abandoned; the records it already handed over are flushed), then the producer flushes, and `/healthz`
/// answers until the very end.
package struct BridgeRuntime: Sendable {
    /// The loaded configuration.
    package let configuration: BridgeConfiguration
    /// The compiled routes.
    package let mapper: RouterMapper
    /// The metrics registry `/metrics` serves.
    package let registry: PrometheusCollectorRegistry
    /// The metrics.
    package let metrics: BridgeMetrics
    private let logger: Logger

    /// Prepares a runtime; nothing connects until ``run(sender:onReady:)``.
    package init(loaded: LoadedConfiguration, registry: PrometheusCollectorRegistry, logger: Logger) {
        self.configuration = loaded.configuration
        self.mapper = RouterMapper(router: loaded.router)
        self.registry = registry
        self.metrics = BridgeMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry))
        self.logger = logger
    }

    /// What a running bridge reports once it is up (for the demo and tests).
    package struct Started: Sendable {
        /// The Kafka bootstrap servers in use (the embedded cluster's when `embedded`).
        package var bootstrapServers: String
        /// The admin server's port.
        package var adminPort: Int
        /// The pipeline, for its readiness and in-flight count.
        package var pipeline: Pipeline
        /// The producer the records go through.
        package var producer: KafkaProducer
    }

    /// Why a bridge stopped by itself.
    package struct Failure: Error, CustomStringConvertible {
        /// What happened.
        package var reason: String

        package var description: String { self.reason }
    }

    /// Runs until SIGTERM or SIGINT (or `group.triggerGracefulShutdown()` through `onStarted`), then drains
    /// and stops cleanly.
    ///
    /// - Parameters:
    ///   - sender: the notification sender and its lifecycle (the APNs clients, or the log sender).
    ///   - embeddedCluster: the cluster to use when `kafka.bootstrap_servers` is `embedded`; when `nil`, one is
    ///     started here with every configured topic.
    ///   - onStarted: called once the admin server listens.
    ///   - onShutdownOverrun: called when a shutdown is still running ``ShutdownSteps/margin`` past
    ///     `shutdown.drain_timeout` after it began, after one error line in the log; `pushbridge run` exits the
    ///     process there. Without it the overrun is only logged.
    ///   - reload: how to reload the configuration on SIGHUP and file changes (``ConfigurationReloader``); `nil`:
    ///     never.
    package func run(
        sender: any ManagedSender,
        embeddedCluster: KafkaMockCluster? = nil,
        signals: [UnixSignal] = [.sigterm, .sigint],
        reload: ConfigurationReloader.Options? = nil,
        onStarted: @escaping @Sendable (Started, ServiceGroup) -> Void = { _, _ in },
        onShutdownOverrun: (@Sendable () -> Void)? = nil
    ) async throws {
        let kafka = self.configuration.kafka
        var ownedCluster: KafkaMockCluster?
        let bootstrapServers: String
        if kafka.isEmbedded {
            let cluster = try embeddedCluster ?? Self.startEmbeddedCluster(for: self.configuration, logger: self.logger)
            if embeddedCluster == nil { ownedCluster = cluster }
            bootstrapServers = cluster.bootstrapServers
        } else {
            bootstrapServers = kafka.bootstrapServers
        }
        defer { ownedCluster?.close() }

        // A fatal producer error (the idempotent producer lost its guarantees) cannot heal: the bridge fails
        // `/healthz`, drains what it can, and exits non-zero so that it is restarted with a new producer.
        let fatal = Mutex<KafkaError?>(nil)
        let groupBox = Mutex<ServiceGroup?>(nil)
        let producer = try KafkaProducer(
            configuration: self.producerConfiguration(bootstrapServers: bootstrapServers),
            logger: self.logger.with(label: "pushbridge.kafka.producer"),
            onFatalError: { error in
                fatal.withLock { $0 = $0 ?? error }
                guard let group = groupBox.withLock({ $0 }) else { return }
                Task { await group.triggerGracefulShutdown() }
            }
        )
        let source = KafkaEventSource(
            configuration: self.consumerConfiguration(bootstrapServers: bootstrapServers),
            topics: self.configuration.inputTopics,
            commitTimeout: ShutdownSteps.commit,
            logger: self.logger.with(label: "pushbridge.kafka.consumer")
        )
        let apns = self.configuration.apns
        // With reloads, new senders replace the one in force behind this one (docs/configuration.md, "Reloading").
        let reloadableSender =
            reload?.makeSender == nil
            ? nil
            : ReloadableSender(
                sender, retireTimeout: self.configuration.shutdown.drainTimeout,
                logger: self.logger.with(label: "pushbridge.reload"))
        let sender: any ManagedSender = reloadableSender ?? sender
        let sink = KafkaRecordSink(producer: producer)
        let metrics = self.metrics
        let feedbackLogger = self.logger.with(label: "pushbridge.feedback")
        let feedbackPollers = FeedbackPollers(
            try FeedbackPoller.pollers(for: self.configuration, sink: sink, metrics: metrics, logger: feedbackLogger)
        ) { configuration in
            try FeedbackPoller.pollers(for: configuration, sink: sink, metrics: metrics, logger: feedbackLogger)
        }
        let pipeline = Pipeline(
            source: source,
            mapper: self.mapper,
            sender: sender,
            sink: sink,
            configuration: PipelineConfiguration(
                maxInFlight: kafka.maxInFlightNotifications,
                maxInFlightBytes: kafka.maxInFlightBytes,
                maxRecordBytes: kafka.producerMessageMaxBytes,
                publishStallTimeout: self.configuration.outcomes.publishStallTimeout,
                maxAttempts: apns.retry.maxAttempts,
                retryBackoff: Backoff(initial: apns.retry.initialBackoff, maximum: apns.retry.maxBackoff),
                maxWaitingPerKey: kafka.maxWaitingPerKey,
                drainTimeout: self.configuration.shutdown.drainTimeout,
                rebalanceDrainTimeout: self.configuration.shutdown.rebalanceDrainTimeout,
                flushTimeout: ShutdownSteps.flush,
                outcomesTopic: self.configuration.outcomes.outcomes,
                invalidTokensTopic: self.configuration.outcomes.invalidTokens,
                deadLetterTopic: self.configuration.outcomes.deadLetters,
                outcomeKey: self.configuration.outcomes.key,
                forwardHeaders: self.configuration.outcomes.forwardHeaders,
                // The default lane (what the named lanes leave of `kafka.max_in_flight` and `max_in_flight_bytes`)
                // and the named ones; none without `lanes:`, so that the pipeline keeps its one line.
                lanes: self.configuration.laneBudgets
            ),
            metrics: self.metrics,
            logger: self.logger.with(label: "pushbridge.pipeline"),
            validate: sender.validate,
            recordHeaders: { RecordHeader.headers(for: sender.providerProtocol(app: $0)) }
        )
        let registry = self.registry
        let admin = AdminServer(
            host: self.configuration.admin.host,
            port: self.configuration.admin.port,
            metrics: { registry.emitToBuffer() },
            readiness: {
                if let error = fatal.withLock({ $0 }) { return .notReady("kafka producer failed: \(error)") }
                return pipeline.readiness
            },
            laneReadiness: { lane in
                guard let readiness = pipeline.readiness(lane: lane) else { return nil }
                if let error = fatal.withLock({ $0 }) { return .notReady("kafka producer failed: \(error)") }
                return readiness
            },
            liveness: { fatal.withLock { $0 }.map { .notReady("kafka producer failed: \($0)") } ?? .ready },
            onBound: { port in
                guard let group = groupBox.withLock({ $0 }) else { return }
                onStarted(
                    Started(
                        bootstrapServers: bootstrapServers, adminPort: port, pipeline: pipeline, producer: producer),
                    group
                )
            },
            logger: self.logger.with(label: "pushbridge.admin")
        )
        let reporter = GaugeReporter(source: source, pipeline: pipeline, sender: sender, metrics: self.metrics)
        let reloader = reload.map { options in
            ConfigurationReloader(
                options: options, configuration: self.configuration, pipeline: pipeline, sender: reloadableSender,
                feedback: feedbackPollers, metrics: self.reloadMetrics(for: options),
                logger: self.logger.with(label: "pushbridge.reload"))
        }
        // After the pipeline, so it stops first: no reload begins once the pipeline drains.
        let reloaderService: [ServiceGroupConfiguration.ServiceConfiguration] =
            reloader.map { [.init(service: $0)] } ?? []
        let shutdownBegan = AsyncCondition<ContinuousClock.Instant?>(nil)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: admin),
                    .init(service: ProducerService(producer: producer)),
                    .init(service: feedbackPollers),
                    .init(service: SenderService(sender: sender)),
                    .init(service: pipeline),
                ] + reloaderService + [
                    .init(service: reporter),
                    .init(service: CommitService(source: source, interval: kafka.commitInterval)),
                    // Last, so the first to hear of the shutdown: it starts the watchdog's clock.
                    .init(service: ShutdownClock(began: shutdownBegan)),
                ],
                gracefulShutdownSignals: signals,
                cancellationSignals: [],
                logger: self.logger.with(label: "pushbridge.lifecycle")
            )
        )
        groupBox.withLock { $0 = group }
        if fatal.withLock({ $0 }) != nil {
            // Raised before the group existed: stop as soon as it starts.
            Task { await group.triggerGracefulShutdown() }
        }
        self.logger.info(
            "PushBridge starting",
            metadata: [
                "kafka.bootstrap_servers": "\(bootstrapServers)",
                "kafka.group_id": "\(kafka.groupID)",
                "kafka.topics": "\(self.configuration.inputTopics.joined(separator: ","))",
            ]
        )
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask {
                await self.watchShutdown(began: shutdownBegan, onOverrun: onShutdownOverrun)
            }
            try await group.run()
            tasks.cancelAll()
        }
        if let error = fatal.withLock({ $0 }) {
            self.logger.critical("PushBridge stopped: the Kafka producer failed", error: error)
            throw Failure(reason: "the Kafka producer failed and cannot recover: \(error)")
        }
        self.logger.info("PushBridge stopped")
    }

    /// The reload metrics, with the configuration's hash and (when the senders are APNs') its credentials as loaded
    /// at start.
    private func reloadMetrics(for options: ConfigurationReloader.Options) -> ReloadMetrics {
        let metrics = ReloadMetrics(factory: BridgeMetrics.prometheusFactory(registry: self.registry))
        if let hash = options.reading.hash { metrics.configuration(hash: hash) }
        if options.makeSender != nil {
            metrics.credentialsLoaded(
                ConfigurationReloader.credentials(of: self.configuration),
                atEpochSeconds: ConfigurationReloader.epochSeconds())
        }
        return metrics
    }

    /// Waits for the shutdown to begin, then for ``ShutdownSteps/margin`` past `shutdown.drain_timeout`; if it gets
    /// there (it is cancelled when the group ends), logs one error line and calls `onOverrun`.
    private func watchShutdown(
        began: AsyncCondition<ContinuousClock.Instant?>, onOverrun: (@Sendable () -> Void)?
    ) async {
        guard case .satisfied(let start) = await began.wait(until: { $0 }) else { return }
        let limit = self.configuration.shutdown.drainTimeout + ShutdownSteps.margin
        guard (try? await Task.sleep(until: start + limit)) != nil else { return }
        self.logger.error(
            "Shutdown overran shutdown.drain_timeout plus its margin; exiting without waiting further. Unfinished events stay uncommitted and are processed again by the partitions' next owner",
            metadata: ["shutdown.limit_s": "\(limit.components.seconds)"])
        onOverrun?()
    }

    /// Starts the in-process mock cluster with every input and result topic created (input topics get
    /// ``embeddedPartitionCount`` partitions).
    package static func startEmbeddedCluster(
        for configuration: BridgeConfiguration, logger: Logger
    ) throws -> KafkaMockCluster {
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "3"])
        for topic in configuration.inputTopics {
            try cluster.createTopic(topic, partitionCount: Self.embeddedPartitionCount)
        }
        let outcomes = configuration.outcomes
        for topic in [outcomes.outcomes, outcomes.invalidTokens, outcomes.deadLetters] {
            try cluster.createTopic(topic, partitionCount: 1)
        }
        logger.notice(
            "Embedded Kafka cluster started (librdkafka mock cluster)",
            metadata: ["kafka.bootstrap_servers": "\(cluster.bootstrapServers)"]
        )
        return cluster
    }

    /// librdkafka consumer settings PushBridge changes from librdkafka's defaults; `kafka.properties` and
    /// `kafka.consumer_properties` override them.
    ///
    /// `queued.max.messages.kbytes`: librdkafka prefetches up to 64 MiB of messages by default. The pipeline
    /// never needs more than `max_in_flight` events ahead, so 16 MiB keeps memory flat and lower (measured with
    /// `make bench`) without slowing consumption.
    ///
    /// `fetch.wait.max.ms` (librdkafka's default 500): how long a broker may hold a fetch that finds no new
    /// message. A consumer that caught up with its partitions keeps such a fetch outstanding, and the next one
    /// waits for it, so after the line was full (partitions paused, the prefetched messages dropped, fetching
    /// from the pause point again on resume) the first refetch could wait up to that long. 100 ms bounds that wait
    /// at the cost of at most ten empty fetches a second per broker while idle (docs/kafka.md, "Resuming wakes
    /// the fetcher").
    ///
    /// The group (docs/operations.md, "Scaling the group", where the figures are):
    /// - `partition.assignment.strategy: cooperative-sticky` (librdkafka's default is the eager `range,roundrobin`):
    ///   a member joining or leaving moves only the partitions it must, and only those stop; eagerly, every member
    ///   gives up every partition at every change, and every partition stops until the group has joined again.
    /// - `session.timeout.ms: 15000` (librdkafka's 45000): how long a member that died (SIGKILL, a lost node) holds
    ///   its partitions before they move. Heartbeats come from librdkafka's own thread, not the pipeline, so only a
    ///   frozen process or a network cut that long costs a rebalance.
    /// - `heartbeat.interval.ms: 1000` (librdkafka's 3000): members learn of a rebalance within about a second,
    ///   and a join completes as soon as every member rejoined.
    /// - `reconnect.backoff.max.ms: 2000` (librdkafka's 10000; the producer has it too): librdkafka doubles its
    ///   wait between attempts to reach a broker up to this. After every broker was away for 5 s, a member reached
    ///   its coordinator again only 9 s after they were back, went 15 s without a heartbeat, and lost its
    ///   assignment (`make soak`, on both brokers: 290 and 803 repeated outcomes). At most 2 s between attempts
    ///   costs one connection attempt per broker every 2 s during a long outage.
    package static let consumerDefaults: [String: String] = [
        "queued.max.messages.kbytes": "16384", "fetch.wait.max.ms": "100",
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "15000",
        "heartbeat.interval.ms": "1000", "reconnect.backoff.max.ms": "2000",
    ]

    /// librdkafka producer settings PushBridge changes from librdkafka's defaults; `kafka.properties` and
    /// `kafka.producer_properties` override them (under either of librdkafka's names for the setting).
    ///
    /// `linger.ms` (librdkafka's default 5): outcomes are keyed by device token, so they spread over every
    /// partition of the outcome topic, and librdkafka wakes its broker thread and sends one batch per partition per
    /// linger period. With 86 partitions and 5 ms, batches held one or two records and the broker thread cost
    /// 5.2 µs per notification; 50 ms brings it to 2.9 µs (docs/benchmarks.md, "The outcome producer's linger").
    /// An outcome is then published up to 50 ms later; the notification keeps its `max_in_flight` slot until then.
    /// `reconnect.backoff.max.ms` (librdkafka's 10000): as for the consumer (``consumerDefaults``), so outcomes are
    /// published again soon after an outage.
    package static let producerDefaults: [(names: [String], value: String)] = [
        (["linger.ms", "queue.buffering.max.ms"], "50"), (["reconnect.backoff.max.ms"], "2000"),
    ]

    /// Partitions of each input topic on the embedded cluster.
    package static let embeddedPartitionCount: Int32 = 4

    func producerConfiguration(bootstrapServers: String) -> KafkaProducerConfiguration {
        let kafka = self.configuration.kafka
        var configuration = KafkaProducerConfiguration(
            bootstrapServers: bootstrapServers,
            properties: kafka.properties.merging(kafka.producerProperties) { _, producer in producer }
        )
        configuration.clientID = kafka.clientID
        for (names, value) in Self.producerDefaults where names.allSatisfy({ configuration.properties[$0] == nil }) {
            configuration.properties[names[0]] = value
        }
        return configuration
    }

    func consumerConfiguration(bootstrapServers: String) -> KafkaConsumerConfiguration {
        let kafka = self.configuration.kafka
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: bootstrapServers,
            groupID: kafka.groupID,
            properties: kafka.properties.merging(kafka.consumerProperties) { _, consumer in consumer }
        )
        configuration.clientID = kafka.clientID
        configuration.commitInterval = kafka.commitInterval
        if configuration.properties["auto.offset.reset"] == nil {
            // A new group starts at the beginning: events produced before the first deployment are not lost.
            configuration.autoOffsetReset = .earliest
        }
        // The revocation's drain plus room for the commit after it: past this the rebalance goes on without it.
        configuration.rebalanceListenerTimeout = self.configuration.shutdown.rebalanceDrainTimeout + .seconds(5)
        configuration.closeTimeout = ShutdownSteps.consumerClose
        for (name, value) in Self.consumerDefaults where configuration.properties[name] == nil {
            configuration.properties[name] = value
        }
        return configuration
    }
}

extension BridgeMetrics {
    /// A swift-prometheus factory on `registry` whose request-duration histogram has
    /// ``requestDurationBuckets`` (1 ms … 10 s, docs/operations.md) instead of the library's default buckets.
    package static func prometheusFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["pushbridge_apns_request_duration_seconds"] = Self.requestDurationBuckets
        return factory
    }
}

extension Logger {
    /// A logger for another component of the process: `label` names it, with this logger's level and metadata. Its
    /// handler is the one `LoggingSystem` makes for `label` (a handler holds its label, so this logger's own one
    /// cannot be relabelled).
    package func with(label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = self.logLevel
        for (key, value) in self.handler.metadata {
            logger[metadataKey: key] = value
        }
        return logger
    }
}
