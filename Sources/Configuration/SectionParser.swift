import BinaryProvider
import Foundation
import Routing
import Yams

/// Turns the YAML tree into ``BridgeConfiguration``, one section at a time, reporting every problem.
struct SectionParser {
    let reader: ConfigurationReader
    /// Whether credential files are read and checked.
    let checksFiles: Bool

    static let topLevelKeys = [
        "kafka", "apns", "apps", "routes", "outcomes", "admin", "logging", "shutdown", "lanes",
    ]
    static let kafkaKeys = [
        "bootstrap_servers", "group_id", "client_id", "commit_interval", "max_in_flight", "max_in_flight_bytes",
        "max_waiting_per_key",
        "properties", "consumer_properties", "producer_properties",
    ]
    static let apnsKeys = [
        "environment", "endpoint", "ca_file", "auth", "connections", "max_concurrent_streams", "request_timeout",
        "retry", "protocol", "binary", "broadcast", "proxy", "proxy_file",
    ]
    static let broadcastKeys = ["management_endpoint"]
    static let binaryKeys = [
        "gateway", "format", "payload_limit", "quiet_window", "max_unconfirmed", "max_resends_without_error",
        "feedback",
    ]
    static let feedbackKeys = ["enabled", "endpoint", "interval", "timeout", "topic"]
    static let authKeys = [
        "type", "key_file", "key_id", "team_id", "p12_file", "p12_password", "p12_password_file", "cert_file",
    ]
    /// The upper bounds of durations (docs/configuration.md). Each is far beyond any sensible setting, and keeps
    /// every deadline and timer computed from it representable in nanoseconds.
    enum Bounds {
        static let commitInterval = Duration.seconds(3600)
        static let requestTimeout = Duration.seconds(600)
        static let backoff = Duration.seconds(3600)
        static let drainTimeout = Duration.seconds(3600)
        /// A year: APNs keeps a notification for a limited time only, and an expiration computed from a
        /// longer `ttl` says nothing more.
        static let ttl = Duration.seconds(365 * 24 * 3600)
        /// A week: Apple asked providers to poll the feedback service daily; a longer interval is a mistake.
        static let feedbackInterval = Duration.seconds(7 * 24 * 3600)
    }

    static let retryKeys = ["max_attempts", "initial_backoff", "max_backoff"]
    static let outcomeKeys = [
        "topic", "invalid_tokens_topic", "dead_letter_topic", "publish_stall_timeout", "key", "forward_headers",
    ]

    func parse(_ document: ConfigValue) -> LoadedConfiguration? {
        guard let root = document.mapping(known: Self.topLevelKeys) else {
            return nil
        }
        let kafka = root.required("kafka", hint: "at least kafka.bootstrap_servers").flatMap(self.kafka)
        let apns = root.required("apns", hint: "the default APNs credentials").flatMap { self.apns($0) }
        let apps = root["apps"].flatMap(self.apps) ?? [:]
        // Routes may name any app that is defined, even one with problems of its own (reported already).
        let appNames = Set(root["apps"]?.node.mapping?.keys.compactMap { $0.scalar?.string } ?? [])
        let lanes = root["lanes"].map { self.lanes($0, kafka: kafka) } ?? []
        // Routes may name any lane that is defined, even one with problems of its own (reported already).
        let laneNames = Set(root["lanes"]?.node.mapping?.keys.compactMap { $0.scalar?.string } ?? [])
        let routes = root.required("routes", hint: "one or more routes").flatMap {
            self.routes($0, appNames: appNames, laneNames: laneNames)
        }
        let outcomes = self.outcomes(root["outcomes"])
        let admin = self.admin(root["admin"])
        let logging = self.logging(root["logging"])
        let shutdown = self.shutdown(root["shutdown"])
        let router = routes.flatMap(self.compile)
        if let routes, let outcomes {
            self.checkTopics(of: routes, against: outcomes)
            self.checkOutcomeKey(of: routes, against: outcomes)
        }
        if let routes, let apns {
            self.checkBroadcastApps(of: routes, apns: apns, apps: apps)
        }
        if let routes, let lanes, let kafka {
            self.checkDefaultLane(of: routes, lanes: lanes, kafka: kafka)
        }
        guard let kafka, let apns, let router, let outcomes, let admin, let logging, let shutdown, let lanes else {
            return nil
        }
        let configuration = BridgeConfiguration(
            kafka: kafka, apns: apns, apps: apps, routes: router.specs, outcomes: outcomes, admin: admin,
            logging: logging, shutdown: shutdown, lanes: lanes
        )
        guard self.checkFeedbackTopics(of: configuration) else {
            return nil
        }
        return LoadedConfiguration(configuration: configuration, router: router)
    }

    /// Every app that polls a feedback service must know the `apns_topic` of its records: its
    /// `binary.feedback.topic`, or the one topic its routes send to.
    func checkFeedbackTopics(of configuration: BridgeConfiguration) -> Bool {
        var valid = true
        for app in configuration.feedbackApps where configuration.feedbackTopic(app: app.name) == nil {
            let block = app.name.map { "apps.\($0)" } ?? "apns"
            let path = "\(block).binary.feedback"
            let routes = Set(configuration.routes.filter { $0.app == app.name }.map(\.topic)).sorted()
            let why =
                routes.isEmpty
                ? "no route sends through this app, so the topic of its feedback records is unknown"
                : "this app's routes send to several topics (\(routes.joined(separator: ", "))), so the topic of its feedback records is ambiguous"
            self.reader.report(
                .missingKey, at: path + ".topic",
                line: self.reader.line(of: path),
                why,
                hint: "write the certificate's topic (the bundle ID) as \(path).topic, or set \(path).enabled: false")
            valid = false
        }
        return valid
    }
}
