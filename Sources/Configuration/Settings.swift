import BinaryProvider
import EgressProxy
import Routing

/// A fully loaded and checked PushBridge configuration (docs/configuration.md). Every default is filled in.
package struct BridgeConfiguration: Sendable {
    /// The Kafka clients.
    package var kafka: KafkaSettings
    /// The default APNs credentials and connection settings (routes without `app:`).
    package var apns: APNSSettings
    /// More APNs credentials by name; a route picks one with `app:`.
    package var apps: [String: APNSSettings]
    /// The routes, in file order, as the YAML states them.
    package var routes: [RouteSpec]
    /// Where records go.
    package var outcomes: OutcomeTopics
    /// The admin HTTP server.
    package var admin: AdminSettings
    /// Logging.
    package var logging: LoggingSettings
    /// Graceful shutdown.
    package var shutdown: ShutdownSettings
    /// The named lanes (`lanes:`), in file order; empty: every route is in the one default lane.
    package var lanes: [LaneSpec]

    /// Creates a configuration; sections left out take the defaults of docs/configuration.md.
    package init(
        kafka: KafkaSettings,
        apns: APNSSettings,
        apps: [String: APNSSettings] = [:],
        routes: [RouteSpec],
        outcomes: OutcomeTopics = OutcomeTopics(),
        admin: AdminSettings = AdminSettings(),
        logging: LoggingSettings = LoggingSettings(),
        shutdown: ShutdownSettings = ShutdownSettings(),
        lanes: [LaneSpec] = []
    ) {
        self.kafka = kafka
        self.apns = apns
        self.apps = apps
        self.routes = routes
        self.outcomes = outcomes
        self.admin = admin
        self.logging = logging
        self.shutdown = shutdown
        self.lanes = lanes
    }

    /// The settings of `app` (`nil`: the default `apns` block); `nil` when no such app is defined.
    package func settings(app: String?) -> APNSSettings? {
        guard let app else { return self.apns }
        return self.apps[app]
    }

    /// Every lane's bounds, the default lane's first (``LaneSpec/all(_:maxInFlight:maxInFlightBytes:)``); empty
    /// without `lanes:`.
    package var laneBudgets: [LaneSpec] {
        guard !self.lanes.isEmpty else { return [] }
        return LaneSpec.all(
            self.lanes, maxInFlight: self.kafka.maxInFlightNotifications, maxInFlightBytes: self.kafka.maxInFlightBytes)
    }

    /// The `apns_topic` of the feedback records of `app` (`nil`: the default `apns` block): its
    /// `binary.feedback.topic`, else the one topic its routes send to; `nil` when neither says (no route uses
    /// the app, or its routes name several topics).
    package func feedbackTopic(app: String?) -> String? {
        if let topic = self.settings(app: app)?.binary.feedback.topic { return topic }
        let topics = Set(self.routes.filter { $0.app == app }.map(\.topic))
        return topics.count == 1 ? topics.first : nil
    }

    /// The apps that poll a feedback service, by name (`nil`: the default `apns` block): `protocol: binary` with
    /// `binary.feedback.enabled`.
    package var feedbackApps: [(name: String?, settings: APNSSettings)] {
        let apps = self.apps.sorted { $0.key < $1.key }.map { (name: Optional($0.key), settings: $0.value) }
        return ([(name: nil, settings: self.apns)] + apps).filter {
            $0.settings.providerProtocol == .binary && $0.settings.binary.feedback.enabled
        }
    }

    /// Every route's input topic, each once, in the order routes name them.
    package var inputTopics: [String] {
        var seen = Set<String>()
        return self.routes.map(\.inputTopic).filter { seen.insert($0).inserted }
    }

    /// The settings a route with `app` (`nil`: the `apns` block) sends with.
    package func apnsSettings(forApp app: String?) -> APNSSettings? {
        guard let app else {
            return self.apns
        }
        return self.apps[app]
    }
}

/// `kafka:` — the consumer and producer.
package struct KafkaSettings: Sendable, Hashable {
    /// `bootstrap_servers`, e.g. `broker-1:9092,broker-2:9092`, or `embedded` for the in-process mock cluster.
    package var bootstrapServers: String
    /// `group_id` (default `pushbridge`): the consumer group shared by all instances.
    package var groupID: String
    /// `client_id` (default `pushbridge`).
    package var clientID: String
    /// `commit_interval` (default 1s): how often finished offsets are committed.
    package var commitInterval: Duration
    /// `max_in_flight` (default 10000): notifications in flight across all partitions.
    package var maxInFlightNotifications: Int
    /// `max_in_flight_bytes` (default 64 MiB): the bytes those hold (their events, payloads and records). One
    /// event larger than this still goes through, alone.
    package var maxInFlightBytes: Int
    /// `max_waiting_per_key` (default 100): the most notifications one ordered line holds waiting; an event that
    /// would add to a full line holds back its own partition until the line is down to half.
    package var maxWaitingPerKey: Int
    /// `properties`: passed verbatim to librdkafka for both clients; values stringified.
    package var properties: [String: String]
    /// `consumer_properties`: passed verbatim to the consumer only.
    package var consumerProperties: [String: String]
    /// `producer_properties`: passed verbatim to the producer only.
    package var producerProperties: [String: String]

    /// Creates Kafka settings; everything but the servers defaults as documented.
    package init(
        bootstrapServers: String,
        groupID: String = "pushbridge",
        clientID: String = "pushbridge",
        commitInterval: Duration = .seconds(1),
        maxInFlightNotifications: Int = 10_000,
        maxInFlightBytes: Int = KafkaSettings.defaultMaxInFlightBytes,
        maxWaitingPerKey: Int = KafkaSettings.defaultMaxWaitingPerKey,
        properties: [String: String] = [:],
        consumerProperties: [String: String] = [:],
        producerProperties: [String: String] = [:]
    ) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
        self.clientID = clientID
        self.commitInterval = commitInterval
        self.maxInFlightNotifications = maxInFlightNotifications
        self.maxInFlightBytes = maxInFlightBytes
        self.maxWaitingPerKey = maxWaitingPerKey
        self.properties = properties
        self.consumerProperties = consumerProperties
        self.producerProperties = producerProperties
    }

    /// The value of `bootstrap_servers` that starts librdkafka's in-process mock cluster.
    package static let embedded = "embedded"

    /// `max_in_flight_bytes` when not given.
    package static let defaultMaxInFlightBytes = 64 << 20
    /// `max_waiting_per_key` when the configuration does not set it.
    package static let defaultMaxWaitingPerKey = 100
    /// What `max_in_flight_bytes` accepts: 1 MiB to 64 GiB.
    package static let maxInFlightBytesRange = (1 << 20)...(64 << 30)

    /// The largest record the producer sends: librdkafka's `message.max.bytes` as configured for the
    /// producer (`properties`, then `producer_properties`), else librdkafka's default.
    package var producerMessageMaxBytes: Int {
        let configured = self.producerProperties["message.max.bytes"] ?? self.properties["message.max.bytes"]
        return configured.flatMap { Int($0.trimmingWhitespace()) }.map { max(1000, $0) } ?? 1_000_000
    }

    /// Whether the bridge should start the in-process mock cluster instead of connecting to brokers.
    package var isEmbedded: Bool { self.bootstrapServers == Self.embedded }
}

/// `apns:` or one entry under `apps:` — credentials and connection settings for one APNs provider.
package struct APNSSettings: Sendable, Hashable {
    /// `environment`: which Apple endpoint.
    package enum Environment: String, Sendable, Hashable, CaseIterable {
        /// `api.push.apple.com`.
        case production
        /// `api.sandbox.push.apple.com`.
        case sandbox

        /// Apple's endpoint for this environment.
        package var endpoint: String {
            switch self {
            case .production: "https://api.push.apple.com:443"
            case .sandbox: "https://api.sandbox.push.apple.com:443"
            }
        }
    }

    /// `environment` (default `production`).
    package var environment: Environment
    /// `endpoint`: overrides the environment's endpoint (a simulator or proxy), `https://host[:port]`.
    package var endpoint: Endpoint?
    /// `ca_file`: an extra trusted root certificate (PEM) for the endpoint.
    package var caFile: String?
    /// `auth`: how the provider authenticates.
    package var auth: APNSAuth
    /// `connections` (default 2): HTTP/2 connections kept open.
    package var connections: Int
    /// `max_concurrent_streams` (default 1000): per connection; the server's SETTINGS may lower it.
    package var maxConcurrentStreams: Int
    /// `request_timeout` (default 10s).
    package var requestTimeout: Duration
    /// `retry`: retries of retryable rejections.
    package var retry: RetrySettings
    /// `protocol` (default `http2`): Apple's HTTP/2 API, or the legacy binary provider protocol.
    package var providerProtocol: ProviderProtocol = .http2
    /// `binary`: the binary protocol's settings (used with `protocol: binary`).
    package var binary = BinaryProtocolSettings()
    /// `broadcast`: where broadcast channels are managed (`pushbridge channels`).
    package var broadcast = BroadcastSettings()
    /// `proxy` (or `proxy_file`), else the environment's `HTTPS_PROXY` with `NO_PROXY`: the HTTP proxy every
    /// connection of this app goes through (device pushes, broadcasts, channel management, the binary gateway and
    /// its feedback service); ``EgressProxyPolicy/proxy(forHost:)`` says which for a host.
    package var proxy: EgressProxyPolicy = .direct

    /// `protocol`: which APNs provider protocol an app speaks.
    package enum ProviderProtocol: String, Sendable, Hashable, CaseIterable {
        /// Apple's HTTP/2 provider API.
        case http2
        /// The legacy binary provider protocol (docs/binary-protocol.md): certificate authentication only.
        case binary
    }

    /// Creates APNs settings; everything but the credentials defaults as documented.
    package init(
        environment: Environment = .production,
        endpoint: Endpoint? = nil,
        caFile: String? = nil,
        auth: APNSAuth,
        connections: Int = 2,
        maxConcurrentStreams: Int = 1000,
        requestTimeout: Duration = .seconds(10),
        retry: RetrySettings = RetrySettings()
    ) {
        self.environment = environment
        self.endpoint = endpoint
        self.caFile = caFile
        self.auth = auth
        self.connections = connections
        self.maxConcurrentStreams = maxConcurrentStreams
        self.requestTimeout = requestTimeout
        self.retry = retry
    }

    /// Where requests go: ``endpoint`` when set, else the environment's endpoint.
    package var effectiveEndpoint: Endpoint {
        if let endpoint = self.endpoint {
            return endpoint
        }
        switch self.environment {
        case .production: return Endpoint(host: "api.push.apple.com", port: 443)
        case .sandbox: return Endpoint(host: "api.sandbox.push.apple.com", port: 443)
        }
    }

    /// Where channel management requests go: `broadcast.management_endpoint` when set, else Apple's management
    /// host of the environment (not ``endpoint``: Apple serves channel management on its own hosts and ports).
    package var effectiveManagementEndpoint: Endpoint {
        self.broadcast.managementEndpoint ?? BroadcastSettings.appleManagementEndpoint(self.environment)
    }

    /// An `https` endpoint.
    package struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// The host name or IP address.
        package var host: String
        /// The TCP port.
        package var port: Int

        /// Creates an endpoint.
        package init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Parses `host:port` (a bracketed IPv6 host allowed) with a port 1–65535; `nil` otherwise.
        package init?(hostAndPort text: String) {
            guard let colon = text.lastIndex(of: ":"), colon != text.startIndex else { return nil }
            var host = String(text[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty, !host.contains("/"), let port = Int(text[text.index(after: colon)...]),
                (1...65_535).contains(port)
            else { return nil }
            self.init(host: host, port: port)
        }

        /// `https://host:port`.
        package var description: String {
            let host = self.host.contains(":") ? "[\(self.host)]" : self.host
            return "https://\(host):\(self.port)"
        }
    }
}

/// `binary:` — the legacy binary provider protocol's settings (docs/binary-protocol.md).
package struct BinaryProtocolSettings: Sendable, Hashable {
    /// `gateway` (`host:port`): where notifications go; `nil` means Apple's historical gateway of the
    /// environment.
    package var gateway: APNSSettings.Endpoint?
    /// `format` (default `framed`).
    package var format: BinaryFormat = .framed
    /// `payload_limit`: `nil` means the format's (Apple's 2048 bytes for framed, 256 for enhanced and simple).
    package var payloadLimit: Int?
    /// The payload limit in force.
    package var payloadLimitBytes: Int { self.payloadLimit ?? self.format.defaultPayloadLimitBytes }
    /// `quiet_window` (default 1s): how long a written notification waits for an error packet before it counts
    /// as delivered.
    package var quietWindow: Duration = .seconds(1)
    /// `max_unconfirmed` (default 10 000): notifications written and not yet confirmed, per connection.
    package var maxUnconfirmed = 10_000
    /// `max_resends_without_error` (default 3): closes without an error packet one notification may be in
    /// doubt through before its outcome is `failed` `ConnectionLost`.
    package var maxResendsWithoutError = 3
    /// `feedback`: the feedback service poller.
    package var feedback = FeedbackSettings()

    /// The defaults above.
    package init() {}

    /// Apple's historical gateways: `gateway.push.apple.com:2195`, `gateway.sandbox.push.apple.com:2195`.
    package static func appleGateway(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "gateway.push.apple.com", port: 2195)
        case .sandbox: APNSSettings.Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195)
        }
    }
}

/// `binary.feedback:` — polling the binary protocol's feedback service for tokens that are no longer valid
/// (docs/binary-protocol.md).
package struct FeedbackSettings: Sendable, Hashable {
    /// `enabled` (default `true`).
    package var enabled = true
    /// `endpoint` (`host:port`): `nil` means Apple's historical feedback service of the environment.
    package var endpoint: APNSSettings.Endpoint?
    /// `interval` (default 1h): the time between two polls; the first poll is made at start.
    package var interval: Duration = .seconds(3600)
    /// `timeout` (default 30s): the longest one poll may take, connecting and reading included.
    package var timeout: Duration = .seconds(30)
    /// `topic`: the `apns_topic` of the records (the certificate's topic); `nil` means the one topic the app's
    /// routes send to (see ``BridgeConfiguration/feedbackTopic(app:)``).
    package var topic: String?

    /// The defaults above.
    package init() {}

    /// Apple's historical feedback services: `feedback.push.apple.com:2196`, `feedback.sandbox.push.apple.com:2196`.
    package static func appleFeedback(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "feedback.push.apple.com", port: 2196)
        case .sandbox: APNSSettings.Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)
        }
    }
}

/// `broadcast:` — broadcast channels (iOS 18 Live Activities) of an HTTP/2 app.
package struct BroadcastSettings: Sendable, Hashable {
    /// `management_endpoint` (`host:port`): where `pushbridge channels` sends channel management requests;
    /// `nil` means Apple's management host of the environment.
    package var managementEndpoint: APNSSettings.Endpoint?

    /// No management endpoint: Apple's.
    package init(managementEndpoint: APNSSettings.Endpoint? = nil) {
        self.managementEndpoint = managementEndpoint
    }

    /// Apple's channel management hosts: `api-manage-broadcast.push.apple.com:2196` and
    /// `api-manage-broadcast.sandbox.push.apple.com:2195` (Apple: *Sending channel management requests to APNs*).
    package static func appleManagementEndpoint(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
        case .sandbox: APNSSettings.Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
        }
    }
}

/// `auth:` — token (JWT, ES256) or certificate authentication.
package enum APNSAuth: Sendable, Hashable {
    /// `type: token`: a `.p8` signing key.
    case token(keyFile: String, keyID: String, teamID: String)
    /// `type: certificate` with `p12_file` and its password (read from `p12_password_file` when given).
    case pkcs12(file: String, password: Secret?)
    /// `type: certificate` with `cert_file` and `key_file` (PEM).
    case pem(certificateFile: String, keyFile: String)
}

/// A secret value: it never prints, so it cannot leak through logs or error messages by accident.
package struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself. Pass it only to the code that needs it.
    package var value: String

    /// Wraps `value`.
    package init(_ value: String) {
        self.value = value
    }

    /// Always `<redacted>`.
    package var description: String { "<redacted>" }
    /// Always `<redacted>`.
    package var debugDescription: String { "<redacted>" }
}

/// `retry:` — how often and how patiently retryable rejections (429, 500, 503) are sent again.
package struct RetrySettings: Sendable, Hashable {
    /// `max_attempts` (default 5): attempts per notification, the first included.
    package var maxAttempts: Int
    /// `initial_backoff` (default 1s).
    package var initialBackoff: Duration
    /// `max_backoff` (default 5m).
    package var maxBackoff: Duration

    /// Creates retry settings with the documented defaults.
    package init(maxAttempts: Int = 5, initialBackoff: Duration = .seconds(1), maxBackoff: Duration = .seconds(300)) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
    }
}

/// `outcomes:` — the topics the bridge writes, and what its records carry besides their fields.
package struct OutcomeTopics: Sendable, Hashable {
    /// `topic` (default `pushbridge.outcomes`): one outcome per notification.
    package var outcomes: String
    /// `invalid_tokens_topic` (default `pushbridge.invalid-tokens`).
    package var invalidTokens: String
    /// `dead_letter_topic` (default `pushbridge.dead-letters`).
    package var deadLetters: String
    /// `publish_stall_timeout` (default 60s): a record Kafka has not acknowledged for this long, through
    /// retries, makes `/readyz` answer 503 with the reason.
    package var publishStallTimeout: Duration
    /// `key` (default `device_token`): the Kafka key of outcome and invalid-token records.
    package var key: OutcomeKey
    /// `forward_headers` (default none): source headers copied onto every record made from an event.
    package var forwardHeaders: HeaderForwarding

    /// `publish_stall_timeout` when not given.
    package static let defaultPublishStallTimeout: Duration = .seconds(60)

    /// Creates the topic names with the documented defaults.
    package init(
        outcomes: String = "pushbridge.outcomes",
        invalidTokens: String = "pushbridge.invalid-tokens",
        deadLetters: String = "pushbridge.dead-letters",
        publishStallTimeout: Duration = OutcomeTopics.defaultPublishStallTimeout,
        key: OutcomeKey = .deviceToken,
        forwardHeaders: HeaderForwarding = HeaderForwarding()
    ) {
        self.outcomes = outcomes
        self.invalidTokens = invalidTokens
        self.deadLetters = deadLetters
        self.publishStallTimeout = publishStallTimeout
        self.key = key
        self.forwardHeaders = forwardHeaders
    }
}

/// `admin:` — the HTTP server for `/metrics`, `/healthz`, `/readyz`.
package struct AdminSettings: Sendable, Hashable {
    /// The host or address to bind (`listen`'s host part; default `0.0.0.0`).
    package var host: String
    /// The TCP port (`listen`'s port part; default 9464; 0 picks a free port).
    package var port: Int

    /// Creates admin settings, by default `0.0.0.0:9464`.
    package init(host: String = "0.0.0.0", port: Int = 9464) {
        self.host = host
        self.port = port
    }
}

/// `logging:`.
package struct LoggingSettings: Sendable, Hashable {
    /// `level` (default `info`).
    package enum Level: String, Sendable, Hashable, CaseIterable {
        /// Everything, including per-message detail.
        case trace
        /// Detail for debugging.
        case debug
        /// Normal operation.
        case info
        /// Noteworthy events (rebalances, halts, resumes).
        case notice
        /// Faults the bridge handles by itself.
        case warning
        /// Faults that need an operator.
        case error
    }

    /// `format` (default `text`).
    package enum Format: String, Sendable, Hashable, CaseIterable {
        /// Human-readable lines.
        case text
        /// One JSON object per line.
        case json
    }

    /// The lowest level logged.
    package var level: Level
    /// The line format.
    package var format: Format

    /// Creates logging settings, by default `info` as `text`.
    package init(level: Level = .info, format: Format = .text) {
        self.level = level
        self.format = format
    }
}

/// `shutdown:` — graceful shutdown on SIGTERM/SIGINT and on partition revocation.
package struct ShutdownSettings: Sendable, Hashable {
    /// `drain_timeout` (default 30s): how long in-flight notifications may take to finish before the bridge
    /// stops anyway (their events stay uncommitted and are processed again after a restart).
    package var drainTimeout: Duration
    /// `rebalance_drain_timeout` (default 10s): the same for the partitions a rebalance takes away. Shorter than a
    /// shutdown's: while it lasts, the partitions that move are read by nobody (with the default, eager assignment,
    /// every partition of the group is), and what it abandons is only processed again.
    package var rebalanceDrainTimeout: Duration

    /// Creates shutdown settings, by default a 30 s drain on shutdown and a 10 s one on a rebalance.
    package init(drainTimeout: Duration = .seconds(30), rebalanceDrainTimeout: Duration = .seconds(10)) {
        self.drainTimeout = drainTimeout
        self.rebalanceDrainTimeout = rebalanceDrainTimeout
    }
}
