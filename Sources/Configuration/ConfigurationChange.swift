import Routing

/// What differs between the running configuration and a new one, split into what a reload applies live and what
/// applies only at a restart (docs/configuration.md, "Reloading").
///
/// Live: routes and templates (as long as they consume the same input topics), the `apns` block and `apps` with their
/// credentials and connection settings, `apns.retry`, the lanes, and binary apps' feedback pollers. Restart-only:
/// everything else — the Kafka clients and the consumer group, lanes where there were none (or none any more), the
/// set of input topics, the result topics, `admin`, `logging`, `shutdown`.
package struct ConfigurationChange: Sendable, Hashable {
    /// A key that changed and applies only at a restart.
    package struct RestartOnlyKey: Sendable, Hashable, CustomStringConvertible {
        /// The key path, as docs/configuration.md names it (`kafka.group_id`, `kafka.properties.linger.ms`).
        package var key: String
        /// What changed, when the key alone does not say (never a value that may be secret).
        package var detail: String?

        /// Creates one.
        package init(_ key: String, detail: String? = nil) {
            self.key = key
            self.detail = detail
        }

        package var description: String { self.detail.map { "\(self.key) (\($0))" } ?? self.key }
    }

    /// Keys that changed and apply only at a restart, roughly in file order. A reload with any is refused.
    package var restartOnly: [RestartOnlyKey]
    /// Blocks that changed and apply live: `apns`, `apps.NAME` (added, removed or changed), `apns.retry`, `lanes`
    /// (lanes added or removed, their shares and `expedite`).
    package var live: [String]

    /// Binary apps whose feedback poller changed (`apns` or `apps.NAME`): the service is now polled, no longer polled,
    /// or with other settings or another APNs topic for its records. Applied live: the pollers are replaced.
    package var feedback: [String]

    /// What a feedback poller is made of.
    private struct FeedbackPoller: Equatable {
        var settings: APNSSettings
        var topic: String?
    }

    /// Whether the APNs side changed: the `apns` block or an app (a new sender is needed).
    package var changesSenders: Bool { self.live.contains { $0 == "apns" || $0.hasPrefix("apps.") } }

    /// Compares `old` (running) with `new`.
    package init(from old: BridgeConfiguration, to new: BridgeConfiguration) {
        var restartOnly: [RestartOnlyKey] = []
        func compare<Value: Equatable>(_ key: String, _ value: (BridgeConfiguration) -> Value) {
            if value(old) != value(new) { restartOnly.append(RestartOnlyKey(key)) }
        }
        compare("kafka.bootstrap_servers") { $0.kafka.bootstrapServers }
        compare("kafka.group_id") { $0.kafka.groupID }
        compare("kafka.client_id") { $0.kafka.clientID }
        compare("kafka.commit_interval") { $0.kafka.commitInterval }
        compare("kafka.max_in_flight") { $0.kafka.maxInFlightNotifications }
        compare("kafka.max_waiting_per_key") { $0.kafka.maxWaitingPerKey }
        compare("kafka.max_in_flight_bytes") { $0.kafka.maxInFlightBytes }
        // Each lane is a bound of the pipeline: its shares, `expedite` and which lanes there are change live (and a
        // route may move to another lane), but whether there are lanes at all (the pipeline's path) only at a restart.
        let lanesChangePath = old.lanes.isEmpty != new.lanes.isEmpty
        if lanesChangePath {
            restartOnly.append(
                RestartOnlyKey("lanes", detail: new.lanes.isEmpty ? "no lanes any more" : "lanes where there were none")
            )
        }
        // Names only: a property's value may be a secret (sasl.password).
        for (section, properties) in [
            ("properties", \KafkaSettings.properties), ("consumer_properties", \KafkaSettings.consumerProperties),
            ("producer_properties", \KafkaSettings.producerProperties),
        ] {
            let before = old.kafka[keyPath: properties]
            let after = new.kafka[keyPath: properties]
            for name in Set(before.keys).union(after.keys).sorted() where before[name] != after[name] {
                restartOnly.append(RestartOnlyKey("kafka.\(section).\(name)"))
            }
        }
        let topicsBefore = Set(old.inputTopics)
        let topicsAfter = Set(new.inputTopics)
        if topicsBefore != topicsAfter {
            var detail: [String] = []
            let added = topicsAfter.subtracting(topicsBefore).sorted()
            let removed = topicsBefore.subtracting(topicsAfter).sorted()
            if !added.isEmpty { detail.append("new input topics: \(added.joined(separator: ", "))") }
            if !removed.isEmpty { detail.append("no longer consumed: \(removed.joined(separator: ", "))") }
            restartOnly.append(RestartOnlyKey("routes[].input_topic", detail: detail.joined(separator: "; ")))
        }
        compare("outcomes.topic") { $0.outcomes.outcomes }
        compare("outcomes.invalid_tokens_topic") { $0.outcomes.invalidTokens }
        compare("outcomes.dead_letter_topic") { $0.outcomes.deadLetters }
        compare("outcomes.publish_stall_timeout") { $0.outcomes.publishStallTimeout }
        compare("admin.listen") { $0.admin }
        compare("logging.level") { $0.logging.level }
        compare("logging.format") { $0.logging.format }
        compare("shutdown.drain_timeout") { $0.shutdown.drainTimeout }
        compare("shutdown.rebalance_drain_timeout") { $0.shutdown.rebalanceDrainTimeout }

        // A binary app's feedback poller: replaced live when what it uses changed (its settings, or the APNs topic its
        // records carry, which may come from the routes).
        func feedbackPollers(_ configuration: BridgeConfiguration) -> [String: FeedbackPoller] {
            Dictionary(
                configuration.feedbackApps.map {
                    (
                        Self.key(app: $0.name),
                        FeedbackPoller(settings: $0.settings, topic: configuration.feedbackTopic(app: $0.name))
                    )
                }
            ) { $1 }
        }
        let feedbackBefore = feedbackPollers(old)
        let feedbackAfter = feedbackPollers(new)
        self.feedback = Set(feedbackBefore.keys).union(feedbackAfter.keys).sorted().filter {
            feedbackBefore[$0] != feedbackAfter[$0]
        }

        // Retry settings are the pipeline's, read through its live settings: they need no new connections.
        func withoutRetry(_ settings: APNSSettings?) -> APNSSettings? {
            var settings = settings
            settings?.retry = RetrySettings()
            return settings
        }
        var live: [String] = []
        if withoutRetry(old.apns) != withoutRetry(new.apns) { live.append("apns") }
        for name in Set(old.apps.keys).union(new.apps.keys).sorted()
        where withoutRetry(old.apps[name]) != withoutRetry(new.apps[name]) {
            live.append("apps.\(name)")
        }
        if old.apns.retry != new.apns.retry { live.append("apns.retry") }
        if !lanesChangePath, old.laneBudgets != new.laneBudgets { live.append("lanes") }
        self.restartOnly = restartOnly
        self.live = live
    }

    /// `apns` for the default block, `apps.NAME` for an app.
    package static func key(app: String?) -> String { app.map { "apps.\($0)" } ?? "apns" }
}
