import BinaryProvider
import Routing

/// A fully loaded and checked PushBridge configuration (docs/configuration.md). Every default is filled in.
public struct BridgeConfiguration: Sendable {
    /// The Kafka clients.
    public var kafka: KafkaSettings
    /// The default APNs credentials and connection settings (routes without `app:`).
    public var apns: APNSSettings
    /// More APNs credentials by name; a route picks one with `app:`.
    public var apps: [String: APNSSettings]
    /// The routes, in file order, as the YAML states them.
    public var routes: [RouteSpec]
    /// Where records go.
    public var outcomes: OutcomeTopics
    /// The admin HTTP server.
    public var admin: AdminSettings
    /// Logging.
    public var logging: LoggingSettings
    /// Graceful shutdown.
    public var shutdown: ShutdownSettings

    /// Creates a configuration; sections left out take the defaults of docs/configuration.md.
    public init(
        kafka: KafkaSettings,
        apns: APNSSettings,
        apps: [String: APNSSettings] = [:],
        routes: [RouteSpec],
        outcomes: OutcomeTopics = OutcomeTopics(),
        admin: AdminSettings = AdminSettings(),
        logging: LoggingSettings = LoggingSettings(),
        shutdown: ShutdownSettings = ShutdownSettings()
    ) {
        self.kafka = kafka
        self.apns = apns
        self.apps = apps
        self.routes = routes
        self.outcomes = outcomes
        self.admin = admin
        self.logging = logging
        self.shutdown = shutdown
    }

    /// The settings of `app` (`nil`: the default `apns` block); `nil` when no such app is defined.
    public func settings(app: String?) -> APNSSettings? {
        guard let app else { return self.apns }
        return self.apps[app]
    }

    /// The `apns_topic` of the feedback records of `app` (`nil`: the default `apns` block): its
    /// `binary.feedback.topic`, else the one topic its routes send to; `nil` when neither says (no route uses
    /// the app, or its routes name several topics).
    public func feedbackTopic(app: String?) -> String? {
        if let topic = self.settings(app: app)?.binary.feedback.topic { return topic }
        let topics = Set(self.routes.filter { $0.app == app }.map(\.topic))
        return topics.count == 1 ? topics.first : nil
    }

    /// The apps that poll a feedback service, by name (`nil`: the default `apns` block): `protocol: binary` with
    /// `binary.feedback.enabled`.
    public var feedbackApps: [(name: String?, settings: APNSSettings)] {
        let apps = self.apps.sorted { $0.key < $1.key }.map { (name: Optional($0.key), settings: $0.value) }
        return ([(name: nil, settings: self.apns)] + apps).filter {
            $0.settings.providerProtocol == .binary && $0.settings.binary.feedback.enabled
        }
    }

    /// Every route's input topic, each once, in the order routes name them.
    public var inputTopics: [String] {
        var seen = Set<String>()
        return self.routes.map(\.inputTopic).filter { seen.insert($0).inserted }
    }

    /// The settings a route with `app` (`nil`: the `apns` block) sends with.
    public func apnsSettings(forApp app: String?) -> APNSSettings? {
        guard let app else {
            return self.apns
        }
        return self.apps[app]
    }
}

/// `kafka:` — the consumer and producer.
public struct KafkaSettings: Sendable, Hashable {
    /// `bootstrap_servers`, e.g. `broker-1:9092,broker-2:9092`, or `embedded` for the in-process mock cluster.
    public var bootstrapServers: String
    /// `group_id` (default `pushbridge`): the consumer group shared by all instances.
    public var groupID: String
    /// `client_id` (default `pushbridge`).
    public var clientID: String
    /// `commit_interval` (default 1s): how often finished offsets are committed.
    public var commitInterval: Duration
    /// `max_in_flight` (default 10000): notifications in flight across all partitions.
    public var maxInFlightNotifications: Int
    /// `max_in_flight_bytes` (default 64 MiB): the bytes those hold (their events, payloads and records). One
    /// event larger than this still goes through, alone.
    public var maxInFlightBytes: Int
    /// `properties`: passed verbatim to librdkafka for both clients; values stringified.
    public var properties: [String: String]
    /// `consumer_properties`: passed verbatim to the consumer only.
    public var consumerProperties: [String: String]
    /// `producer_properties`: passed verbatim to the producer only.
    public var producerProperties: [String: String]

    /// Creates Kafka settings; everything but the servers defaults as documented.
    public init(
        bootstrapServers: String,
        groupID: String = "pushbridge",
        clientID: String = "pushbridge",
        commitInterval: Duration = .seconds(1),
        maxInFlightNotifications: Int = 10_000,
        maxInFlightBytes: Int = KafkaSettings.defaultMaxInFlightBytes,
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
        self.properties = properties
        self.consumerProperties = consumerProperties
        self.producerProperties = producerProperties
    }

    /// The value of `bootstrap_servers` that starts librdkafka's in-process mock cluster.
    public static let embedded = "embedded"

    /// `max_in_flight_bytes` when not given.
    public static let defaultMaxInFlightBytes = 64 << 20
    /// What `max_in_flight_bytes` accepts: 1 MiB to 64 GiB.
    public static let maxInFlightBytesRange = (1 << 20)...(64 << 30)

    /// The largest record the producer sends: librdkafka's `message.max.bytes` as configured for the
    /// producer (`properties`, then `producer_properties`), else librdkafka's default.
    public var producerMessageMaxBytes: Int {
        let configured = self.producerProperties["message.max.bytes"] ?? self.properties["message.max.bytes"]
        return configured.flatMap { Int($0.trimmingWhitespace()) }.map { max(1000, $0) } ?? 1_000_000
    }

    /// Whether the bridge should start the in-process mock cluster instead of connecting to brokers.
    public var isEmbedded: Bool { self.bootstrapServers == Self.embedded }
}

/// `apns:` or one entry under `apps:` — credentials and connection settings for one APNs provider.
public struct APNSSettings: Sendable, Hashable {
    /// `environment`: which Apple endpoint.
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        /// `api.push.apple.com`.
        case production
        /// `api.sandbox.push.apple.com`.
        case sandbox

        /// Apple's endpoint for this environment.
        public var endpoint: String {
            switch self {
            case .production: "https://api.push.apple.com:443"
            case .sandbox: "https://api.sandbox.push.apple.com:443"
            }
        }
    }

    /// `environment` (default `production`).
    public var environment: Environment
    /// `endpoint`: overrides the environment's endpoint (a simulator or proxy), `https://host[:port]`.
    public var endpoint: Endpoint?
    /// `ca_file`: an extra trusted root certificate (PEM) for the endpoint.
    public var caFile: String?
    /// `auth`: how the provider authenticates.
    public var auth: APNSAuth
    /// `connections` (default 2): HTTP/2 connections kept open.
    public var connections: Int
    /// `max_concurrent_streams` (default 1000): per connection; the server's SETTINGS may lower it.
    public var maxConcurrentStreams: Int
    /// `request_timeout` (default 10s).
    public var requestTimeout: Duration
    /// `retry`: retries of retryable rejections.
    public var retry: RetrySettings
    /// `protocol` (default `http2`): Apple's HTTP/2 API, or the legacy binary provider protocol.
    public var providerProtocol: ProviderProtocol = .http2
    /// `binary`: the binary protocol's settings (used with `protocol: binary`).
    public var binary = BinaryProtocolSettings()
    /// `broadcast`: where broadcast channels are managed (`pushbridge channels`).
    public var broadcast = BroadcastSettings()

    /// `protocol`: which APNs provider protocol an app speaks.
    public enum ProviderProtocol: String, Sendable, Hashable, CaseIterable {
        /// Apple's HTTP/2 provider API.
        case http2
        /// The legacy binary provider protocol (docs/binary-protocol.md): certificate authentication only.
        case binary
    }

    /// Creates APNs settings; everything but the credentials defaults as documented.
    public init(
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
    public var effectiveEndpoint: Endpoint {
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
    public var effectiveManagementEndpoint: Endpoint {
        self.broadcast.managementEndpoint ?? BroadcastSettings.appleManagementEndpoint(self.environment)
    }

    /// An `https` endpoint.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// The host name or IP address.
        public var host: String
        /// The TCP port.
        public var port: Int

        /// Creates an endpoint.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Parses `host:port` (a bracketed IPv6 host allowed) with a port 1–65535; `nil` otherwise.
        public init?(hostAndPort text: String) {
            guard let colon = text.lastIndex(of: ":"), colon != text.startIndex else { return nil }
            var host = String(text[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty, !host.contains("/"), let port = Int(text[text.index(after: colon)...]),
                (1...65_535).contains(port)
            else { return nil }
            self.init(host: host, port: port)
        }

        /// `https://host:port`.
        public var description: String {
            let host = self.host.contains(":") ? "[\(self.host)]" : self.host
            return "https://\(host):\(self.port)"
        }
    }
}

/// `binary:` — the legacy binary provider protocol's settings (docs/binary-protocol.md).
public struct BinaryProtocolSettings: Sendable, Hashable {
    /// `gateway` (`host:port`): where notifications go; `nil` means Apple's historical gateway of the
    /// environment.
    public var gateway: APNSSettings.Endpoint?
    /// `format` (default `framed`).
    public var format: BinaryFormat = .framed
    /// `payload_limit` (default 2048 bytes; 256 for old gateways).
    public var payloadLimitBytes = BinaryFrame.framedPayloadLimitBytes
    /// `quiet_window` (default 1s): how long a written notification waits for an error packet before it counts
    /// as delivered.
    public var quietWindow: Duration = .seconds(1)
    /// `max_unconfirmed` (default 10 000): notifications written and not yet confirmed, per connection.
    public var maxUnconfirmed = 10_000
    /// `max_resends_without_error` (default 3): closes without an error packet one notification may be in
    /// doubt through before its outcome is `failed` `ConnectionLost`.
    public var maxResendsWithoutError = 3
    /// `feedback`: the feedback service poller.
    public var feedback = FeedbackSettings()

    /// The defaults above.
    public init() {}

    /// Apple's historical gateways: `gateway.push.apple.com:2195`, `gateway.sandbox.push.apple.com:2195`.
    public static func appleGateway(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "gateway.push.apple.com", port: 2195)
        case .sandbox: APNSSettings.Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195)
        }
    }
}

/// `binary.feedback:` — polling the binary protocol's feedback service for tokens that are no longer valid
/// (docs/binary-protocol.md).
public struct FeedbackSettings: Sendable, Hashable {
    /// `enabled` (default `true`).
    public var enabled = true
    /// `endpoint` (`host:port`): `nil` means Apple's historical feedback service of the environment.
    public var endpoint: APNSSettings.Endpoint?
    /// `interval` (default 1h): the time between two polls; the first poll is made at start.
    public var interval: Duration = .seconds(3600)
    /// `timeout` (default 30s): the longest one poll may take, connecting and reading included.
    public var timeout: Duration = .seconds(30)
    /// `topic`: the `apns_topic` of the records (the certificate's topic); `nil` means the one topic the app's
    /// routes send to (see ``BridgeConfiguration/feedbackTopic(app:)``).
    public var topic: String?

    /// The defaults above.
    public init() {}

    /// Apple's historical feedback services: `feedback.push.apple.com:2196`, `feedback.sandbox.push.apple.com:2196`.
    public static func appleFeedback(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "feedback.push.apple.com", port: 2196)
        case .sandbox: APNSSettings.Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)
        }
    }
}

/// `broadcast:` — broadcast channels (iOS 18 Live Activities) of an HTTP/2 app.
public struct BroadcastSettings: Sendable, Hashable {
    /// `management_endpoint` (`host:port`): where `pushbridge channels` sends channel management requests;
    /// `nil` means Apple's management host of the environment.
    public var managementEndpoint: APNSSettings.Endpoint?

    /// No management endpoint: Apple's.
    public init(managementEndpoint: APNSSettings.Endpoint? = nil) {
        self.managementEndpoint = managementEndpoint
    }

    /// Apple's channel management hosts: `api-manage-broadcast.push.apple.com:2196` and
    /// `api-manage-broadcast.sandbox.push.apple.com:2195` (Apple: *Sending channel management requests to APNs*).
    public static func appleManagementEndpoint(_ environment: APNSSettings.Environment) -> APNSSettings.Endpoint {
        switch environment {
        case .production: APNSSettings.Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
        case .sandbox: APNSSettings.Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
        }
    }
}

/// `auth:` — token (JWT, ES256) or certificate authentication.
public enum APNSAuth: Sendable, Hashable {
    /// `type: token`: a `.p8` signing key.
    case token(keyFile: String, keyID: String, teamID: String)
    /// `type: certificate` with `p12_file` and its password (read from `p12_password_file` when given).
    case pkcs12(file: String, password: Secret?)
    /// `type: certificate` with `cert_file` and `key_file` (PEM).
    case pem(certificateFile: String, keyFile: String)
}

/// A secret value: it never prints, so it cannot leak through logs or error messages by accident.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself. Pass it only to the code that needs it.
    public var value: String

    /// Wraps `value`.
    public init(_ value: String) {
        self.value = value
    }

    /// Always `<redacted>`.
    public var description: String { "<redacted>" }
    /// Always `<redacted>`.
    public var debugDescription: String { "<redacted>" }
}

/// `retry:` — how often and how patiently retryable rejections (429, 500, 503) are sent again.
public struct RetrySettings: Sendable, Hashable {
    /// `max_attempts` (default 5): attempts per notification, the first included.
    public var maxAttempts: Int
    /// `initial_backoff` (default 1s).
    public var initialBackoff: Duration
    /// `max_backoff` (default 5m).
    public var maxBackoff: Duration

    /// Creates retry settings with the documented defaults.
    public init(maxAttempts: Int = 5, initialBackoff: Duration = .seconds(1), maxBackoff: Duration = .seconds(300)) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
    }
}

/// `outcomes:` — the topics the bridge writes.
public struct OutcomeTopics: Sendable, Hashable {
    /// `topic` (default `pushbridge.outcomes`): one outcome per notification.
    public var outcomes: String
    /// `invalid_tokens_topic` (default `pushbridge.invalid-tokens`).
    public var invalidTokens: String
    /// `dead_letter_topic` (default `pushbridge.dead-letters`).
    public var deadLetters: String
    /// `publish_stall_timeout` (default 60s): a record Kafka has not acknowledged for this long, through
    /// retries, makes `/readyz` answer 503 with the reason.
    public var publishStallTimeout: Duration

    /// `publish_stall_timeout` when not given.
    public static let defaultPublishStallTimeout: Duration = .seconds(60)

    /// Creates the topic names with the documented defaults.
    public init(
        outcomes: String = "pushbridge.outcomes",
        invalidTokens: String = "pushbridge.invalid-tokens",
        deadLetters: String = "pushbridge.dead-letters",
        publishStallTimeout: Duration = OutcomeTopics.defaultPublishStallTimeout
    ) {
        self.outcomes = outcomes
        self.invalidTokens = invalidTokens
        self.deadLetters = deadLetters
        self.publishStallTimeout = publishStallTimeout
    }
}

/// `admin:` — the HTTP server for `/metrics`, `/healthz`, `/readyz`.
public struct AdminSettings: Sendable, Hashable {
    /// The host or address to bind (`listen`'s host part; default `0.0.0.0`).
    public var host: String
    /// The TCP port (`listen`'s port part; default 9464; 0 picks a free port).
    public var port: Int

    /// Creates admin settings, by default `0.0.0.0:9464`.
    public init(host: String = "0.0.0.0", port: Int = 9464) {
        self.host = host
        self.port = port
    }
}

/// `logging:`.
public struct LoggingSettings: Sendable, Hashable {
    /// `level` (default `info`).
    public enum Level: String, Sendable, Hashable, CaseIterable {
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
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// Human-readable lines.
        case text
        /// One JSON object per line.
        case json
    }

    /// The lowest level logged.
    public var level: Level
    /// The line format.
    public var format: Format

    /// Creates logging settings, by default `info` as `text`.
    public init(level: Level = .info, format: Format = .text) {
        self.level = level
        self.format = format
    }
}

/// `shutdown:` — graceful shutdown on SIGTERM/SIGINT and on partition revocation.
public struct ShutdownSettings: Sendable, Hashable {
    /// `drain_timeout` (default 30s): how long in-flight notifications may take to finish before the bridge
    /// stops anyway (their events stay uncommitted and are processed again after a restart).
    public var drainTimeout: Duration

    /// Creates shutdown settings, by default a 30 s drain.
    public init(drainTimeout: Duration = .seconds(30)) {
        self.drainTimeout = drainTimeout
    }
}
