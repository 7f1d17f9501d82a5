import APNSClient
import APNSCore
import BinaryProvider
import Configuration
import Foundation
import HTTP2
import Kafka
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Routing

/// `pushbridge doctor`'s checks: what usually goes wrong in production, each found and explained with a fix.
///
/// For the `apns` block and every app under `apps`: credentials parse, the certificate's validity, environment
/// and topics, TCP, verified TLS with ALPN `h2` and the server's SETTINGS, whether APNs accepts the provider
/// token (or certificate), and the clock against the server's `date`. Then Kafka: reachable, and every input and
/// result topic present. Nothing is delivered: the probe request goes to an all-zero device token.
public struct Doctor: Sendable {
    /// Timeouts and thresholds.
    public struct Options: Sendable {
        /// How long the Kafka metadata request may take.
        public var kafkaTimeout: Duration
        /// How long connecting to APNs (TCP, TLS, SETTINGS) and the probe request may take, each.
        public var apnsTimeout: Duration
        /// A certificate expiring sooner than this is a warning.
        public var certificateExpiryWarning: Duration
        /// Clock skew above this is a warning.
        public var clockSkewWarning: Duration
        /// Clock skew above this is a failure.
        public var clockSkewFailure: Duration

        /// The documented defaults: 10 s timeouts, 30 days, 1 minute, 10 minutes.
        public init(
            kafkaTimeout: Duration = .seconds(10),
            apnsTimeout: Duration = .seconds(10),
            certificateExpiryWarning: Duration = .seconds(30 * 86_400),
            clockSkewWarning: Duration = .seconds(60),
            clockSkewFailure: Duration = .seconds(600)
        ) {
            self.kafkaTimeout = kafkaTimeout
            self.apnsTimeout = apnsTimeout
            self.certificateExpiryWarning = certificateExpiryWarning
            self.clockSkewWarning = clockSkewWarning
            self.clockSkewFailure = clockSkewFailure
        }
    }

    /// The device token of the probe request: valid hex, never issued by Apple, so APNs answers `BadDeviceToken`
    /// after it has checked the credentials.
    public static let probeDeviceToken = String(repeating: "0", count: 64)

    /// The configuration checked.
    public let configuration: BridgeConfiguration
    /// Timeouts and thresholds.
    public let options: Options
    private let clock: any WallClock
    private let eventLoopGroup: any EventLoopGroup

    /// Creates a doctor for `configuration`; `clock` is the local clock compared with the servers'.
    public init(
        configuration: BridgeConfiguration,
        options: Options = Options(),
        clock: any WallClock = SystemWallClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.options = options
        self.clock = clock
        self.eventLoopGroup = eventLoopGroup
    }

    /// Runs every check, in order: each APNs provider (`apns`, then `apps` by name), then Kafka.
    public func run() async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        checks += await self.checkAPNS(self.configuration.apns, scope: "apns", app: nil)
        checks += await self.checkChannels(self.configuration.apns, scope: "apns", app: nil)
        for name in self.configuration.apps.keys.sorted() {
            checks += await self.checkAPNS(self.configuration.apps[name]!, scope: "apps.\(name)", app: name)
            checks += await self.checkChannels(self.configuration.apps[name]!, scope: "apps.\(name)", app: name)
        }
        checks += await self.checkKafka()
        checks += self.checkKafkaTLS()
        return checks
    }

    /// The librdkafka settings that turn off TLS server verification, and the values that do so.
    static let verificationSettings: [(key: String, isOff: @Sendable (String) -> Bool)] = [
        ("enable.ssl.certificate.verification", { ["false", "0", "no", "off", "f", "n"].contains($0) }),
        ("ssl.endpoint.identification.algorithm", { $0.isEmpty || $0 == "none" }),
    ]

    /// A warning when Kafka's TLS verification is turned off in `kafka.properties`, `consumer_properties` or
    /// `producer_properties`: the bridge would then talk to any broker presenting any certificate (or any
    /// certificate for another host), and send it its credentials. An ok line when TLS is configured and
    /// nothing turns verification off; nothing when Kafka is not spoken over TLS at all.
    public func checkKafkaTLS() -> [DoctorCheck] {
        let kafka = self.configuration.kafka
        let sections = [
            ("kafka.properties", kafka.properties), ("kafka.consumer_properties", kafka.consumerProperties),
            ("kafka.producer_properties", kafka.producerProperties),
        ]
        var findings: [String] = []
        var usesTLS = false
        for (section, properties) in sections {
            let normalized = Dictionary(
                properties.map { ($0.key.lowercased(), $0.value.trimmingCharacters(in: .whitespaces).lowercased()) },
                uniquingKeysWith: { first, _ in first }
            )
            if let protocolName = normalized["security.protocol"], protocolName.hasSuffix("ssl") {
                usesTLS = true
            }
            for setting in Self.verificationSettings {
                if let value = normalized[setting.key], setting.isOff(value) {
                    findings.append("\(section): \(setting.key)=\(value.isEmpty ? "\"\"" : value)")
                }
            }
        }
        guard findings.isEmpty else {
            return [
                DoctorCheck(
                    .warn, "kafka tls",
                    "TLS verification of the brokers is turned off (\(findings.joined(separator: ", ")))",
                    hint: "remove these settings so that librdkafka verifies the broker certificate and host name "
                        + "(enable.ssl.certificate.verification=true, ssl.endpoint.identification.algorithm=https, "
                        + "its defaults); for a private CA set ssl.ca.location instead"
                )
            ]
        }
        if usesTLS {
            return [DoctorCheck(.ok, "kafka tls", "broker certificates and host names are verified")]
        }
        return []
    }

    // MARK: Kafka

    /// Kafka reachable (one metadata request) and every input and result topic present.
    public func checkKafka() async -> [DoctorCheck] {
        let kafka = self.configuration.kafka
        if kafka.isEmbedded {
            return [
                DoctorCheck(
                    .ok, "kafka", "bootstrap_servers is 'embedded': the in-process mock cluster, nothing to reach")
            ]
        }
        let metadata: KafkaMetadata
        do {
            metadata = try await KafkaMetadata.fetch(
                bootstrapServers: kafka.bootstrapServers,
                properties: kafka.properties,
                timeout: self.options.kafkaTimeout
            )
        } catch {
            if let cause = (error as? KafkaError)?.knownCause {
                return [
                    DoctorCheck(
                        .fail, "kafka reachable", "\(kafka.bootstrapServers) answers, but \(cause.cause)",
                        hint: cause.fix),
                    DoctorCheck(
                        .warn, "kafka topics", "not checked: Kafka is unusable", hint: "fix the cause above first"),
                ]
            }
            return [
                DoctorCheck(
                    .fail, "kafka reachable",
                    "no metadata from \(kafka.bootstrapServers) within "
                        + "\(Self.text(self.options.kafkaTimeout)): \(error)",
                    hint: "check kafka.bootstrap_servers, that the brokers run and this host can reach their ports, "
                        + "and the security settings under kafka.properties"
                ),
                DoctorCheck(
                    .warn, "kafka topics", "not checked: Kafka is unreachable", hint: "fix the reachability first"),
            ]
        }
        var checks = [
            DoctorCheck(
                .ok, "kafka reachable",
                "\(kafka.bootstrapServers): \(metadata.brokerCount) broker\(metadata.brokerCount == 1 ? "" : "s"), "
                    + "\(metadata.partitionCountsByTopic.count) topics "
                    + "(librdkafka \(KafkaKnownCause.librdkafkaVersion))"
            )
        ]
        let outcomes = self.configuration.outcomes
        let needed = self.configuration.inputTopics + [outcomes.outcomes, outcomes.invalidTokens, outcomes.deadLetters]
        let missing = needed.filter { metadata.partitionCountsByTopic[$0] == nil }
        if missing.isEmpty {
            let inputs = self.configuration.inputTopics.map { "\($0) (\(metadata.partitionCountsByTopic[$0]!)p)" }
            checks.append(
                DoctorCheck(
                    .ok, "kafka topics", "all present: \(inputs.joined(separator: ", ")) and the 3 result topics")
            )
        } else {
            checks.append(
                DoctorCheck(
                    .fail, "kafka topics", "missing on the cluster: \(missing.joined(separator: ", "))",
                    hint: "create them, e.g. kafka-topics.sh --create --topic NAME --partitions N "
                        + "(input topics: as many partitions as bridge instances you want), "
                        + "or fix the names in routes/outcomes"
                )
            )
        }
        return checks
    }

    // MARK: APNs

    /// Everything about one APNs provider (`scope` names it in the output; `app` selects its routes).
    public func checkAPNS(_ settings: APNSSettings, scope: String, app: String?) async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let routes = self.configuration.routes.filter { $0.app == app }
        let (credentials, credentialChecks) = self.checkCredentials(settings, scope: scope, routes: routes)
        checks += credentialChecks

        if settings.providerProtocol == .binary {
            checks += await self.checkBinary(settings, credentials: credentials, scope: scope)
            if settings.binary.feedback.enabled {
                checks.append(await self.checkFeedback(settings, scope: scope))
            }
            return checks
        }
        let endpoint = settings.effectiveEndpoint
        let tcp = await self.checkTCP(endpoint, scope: scope)
        checks.append(tcp)
        guard tcp.status == .ok else {
            checks.append(DoctorCheck(.warn, "\(scope) tls", "not checked: no TCP connection", hint: "fix TCP first"))
            return checks
        }
        var tls = HTTP2ClientTLS(additionalTrustRootsPEMFile: settings.caFile)
        if case .certificate(let certificate) = credentials {
            tls.clientCertificateChain = certificate.certificateChain
            tls.clientPrivateKey = certificate.privateKey
        }
        let connection: HTTP2ClientConnection
        do {
            connection = try await HTTP2ClientConnection.connect(
                configuration: HTTP2ClientConfiguration(
                    // No local cap, so the connection's limit is the server's SETTINGS_MAX_CONCURRENT_STREAMS.
                    host: endpoint.host, port: endpoint.port, tls: tls, maxConcurrentStreams: Int(Int32.max),
                    requestTimeout: self.options.apnsTimeout, connectTimeout: self.options.apnsTimeout
                ),
                eventLoopGroup: self.eventLoopGroup
            )
        } catch {
            checks.append(self.tlsFailure(error, endpoint: endpoint, settings: settings, scope: scope))
            return checks
        }
        let streams = connection.state.maxConcurrentStreams
        checks.append(
            DoctorCheck(
                .ok, "\(scope) tls",
                "\(endpoint): TLS verified, ALPN h2, server SETTINGS_MAX_CONCURRENT_STREAMS "
                    + (streams >= Int(Int32.max) ? "unlimited (none sent)" : "\(streams)")
            )
        )
        checks += await self.probe(connection, credentials: credentials, scope: scope, routes: routes)
        await connection.close()
        return checks
    }

    /// The parsed credentials a provider authenticates with.
    enum Credentials {
        case token(SigningKey)
        case certificate(CertificateCredentials)
        case unusable
    }

    private func checkCredentials(_ settings: APNSSettings, scope: String, routes: [RouteSpec])
        -> (Credentials, [DoctorCheck])
    {
        let name = "\(scope) credentials"
        do throws(CredentialError) {
            switch settings.auth {
            case .token(let keyFile, let keyID, let teamID):
                let key = try SigningKey.load(p8Path: keyFile, keyID: keyID, teamID: teamID)
                return (
                    .token(key),
                    [DoctorCheck(.ok, name, "\(keyFile): P-256 signing key (key ID \(keyID), team ID \(teamID))")]
                )
            case .pkcs12(let file, let password):
                let credentials = try CertificateCredentials.load(p12Path: file, password: password?.value ?? "")
                return (
                    .certificate(credentials),
                    [DoctorCheck(.ok, name, "\(file): PKCS#12 bundle opens (certificate and private key)")]
                        + self.checkCertificate(credentials, settings: settings, scope: scope, routes: routes)
                )
            case .pem(let certificateFile, let keyFile):
                let credentials = try CertificateCredentials.load(
                    certificatePEMPath: certificateFile, keyPEMPath: keyFile)
                return (
                    .certificate(credentials),
                    [DoctorCheck(.ok, name, "\(certificateFile) and \(keyFile): PEM certificate and private key")]
                        + self.checkCertificate(credentials, settings: settings, scope: scope, routes: routes)
                )
            }
        } catch {
            let hint =
                switch error.code {
                case .invalidPKCS12: "check p12_password (or p12_password_file) and re-export the .p12 from Keychain"
                case .invalidSigningKey:
                    "use the AuthKey_KEYID.p8 downloaded from developer.apple.com (Keys), unmodified"
                case .invalidCertificate, .invalidPrivateKey:
                    "cert_file must hold the PEM certificate, key_file its unencrypted PEM private key "
                        + "(openssl pkcs12 -in push.p12 -nodes)"
                case .unreadable: "check the path and that the bridge's user may read it"
                case .invalidIdentifier: "copy key_id and team_id from developer.apple.com (10 letters and digits)"
                case .missingPassword: "set the password's environment variable"
                }
            return (.unusable, [DoctorCheck(.fail, name, error.description, hint: hint)])
        }
    }

    private func checkCertificate(
        _ credentials: CertificateCredentials,
        settings: APNSSettings,
        scope: String,
        routes: [RouteSpec]
    ) -> [DoctorCheck] {
        let inspection: CertificateInspection
        do {
            inspection = try CertificateInspection(credentials.certificateChain[0])
        } catch {
            return [
                DoctorCheck(
                    .fail, "\(scope) certificate", "swift-certificates cannot read the certificate: \(error)",
                    hint: "export the APNs certificate again from developer.apple.com"
                )
            ]
        }
        return [
            self.checkExpiry(inspection, scope: scope),
            self.checkEnvironment(inspection, settings: settings, scope: scope, routes: routes),
        ]
    }

    func checkExpiry(_ inspection: CertificateInspection, scope: String) -> DoctorCheck {
        let now = self.clock.now()
        let name = "\(scope) certificate expiry"
        let formatter = ISO8601DateFormatter()
        let until = formatter.string(from: inspection.notValidAfter)
        let hint = "create a new APNs certificate on developer.apple.com (or switch to token auth, which never expires)"
        if inspection.notValidAfter < now {
            return DoctorCheck(.fail, name, "\(inspection.subject) expired on \(until)", hint: hint)
        }
        if inspection.notValidBefore > now {
            return DoctorCheck(
                .fail, name,
                "\(inspection.subject) is not valid before \(formatter.string(from: inspection.notValidBefore))",
                hint: "check this host's clock"
            )
        }
        let days = Int(inspection.notValidAfter.timeIntervalSince(now) / 86_400)
        let warning = Double(self.options.certificateExpiryWarning.components.seconds)
        if inspection.notValidAfter.timeIntervalSince(now) < warning {
            return DoctorCheck(.warn, name, "\(inspection.subject) expires in \(days) days, on \(until)", hint: hint)
        }
        return DoctorCheck(.ok, name, "valid until \(until) (\(days) days)")
    }

    func checkEnvironment(
        _ inspection: CertificateInspection,
        settings: APNSSettings,
        scope: String,
        routes: [RouteSpec]
    ) -> DoctorCheck {
        let name = "\(scope) certificate environment and topics"
        guard inspection.hasApplePushExtensions else {
            return DoctorCheck(
                .warn, name,
                "\(inspection.subject) carries none of Apple's push extensions (1.2.840.113635.100.6.3.x): "
                    + "environment and topics not checked",
                hint: "use the certificate created for the app under Certificates on developer.apple.com"
            )
        }
        let universal = inspection.listedTopics != nil
        let environment = settings.environment
        let covers =
            switch environment {
            case .production: inspection.isProduction || universal
            case .sandbox: inspection.isDevelopment || universal
            }
        if !covers {
            let has = inspection.isProduction ? "production" : "development (sandbox)"
            return DoctorCheck(
                .fail, name, "a \(has) certificate, but environment is \(environment.rawValue)",
                hint: "set environment to \(inspection.isProduction ? "production" : "sandbox") or use a "
                    + "Sandbox & Production certificate"
            )
        }
        let covered = Set(inspection.topics)
        let bundles = Set(routes.map { Self.bundleID(of: $0) })
        let uncovered = bundles.subtracting(covered).sorted()
        if !covered.isEmpty, !uncovered.isEmpty {
            return DoctorCheck(
                .fail, name,
                "routes use \(uncovered.joined(separator: ", ")), the certificate covers "
                    + "\(covered.sorted().joined(separator: ", "))",
                hint: "use the certificate of that bundle ID, or move those routes to an app with the right credentials"
            )
        }
        let voipRoutes = routes.filter { $0.pushType == PushType.voip.rawValue }.map(\.name)
        if !voipRoutes.isEmpty, !inspection.isVoIP, !universal {
            return DoctorCheck(
                .warn, name,
                "routes \(voipRoutes.joined(separator: ", ")) send voip, the certificate has no VoIP extension",
                hint: "create a VoIP Services certificate, or use token auth"
            )
        }
        let kinds = [inspection.isDevelopment ? "development" : nil, inspection.isProduction ? "production" : nil]
            .compactMap { $0 }
        return DoctorCheck(
            .ok, name,
            "\(kinds.isEmpty ? "universal" : kinds.joined(separator: "+")) certificate for "
                + "\(covered.sorted().joined(separator: ", ")); environment \(environment.rawValue)"
        )
    }

    /// The bundle ID a route sends to (its topic without the push type's suffix).
    static func bundleID(of route: RouteSpec) -> String {
        guard let pushType = PushType(rawValue: route.pushType), !pushType.topicSuffix.isEmpty,
            route.topic.hasSuffix(pushType.topicSuffix)
        else { return route.topic }
        return String(route.topic.dropLast(pushType.topicSuffix.count))
    }

    private func checkTCP(_ endpoint: APNSSettings.Endpoint, scope: String) async -> DoctorCheck {
        let bootstrap = ClientBootstrap(group: self.eventLoopGroup)
            .connectTimeout(TimeAmount(self.options.apnsTimeout))  // NIO clamps; never traps
        do {
            let channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
            let peer = channel.remoteAddress.map { "\($0)" } ?? "\(endpoint.host):\(endpoint.port)"
            try? await channel.close()
            return DoctorCheck(.ok, "\(scope) tcp", "\(endpoint.host):\(endpoint.port) connects (\(peer))")
        } catch {
            return DoctorCheck(
                .fail, "\(scope) tcp", "cannot connect to \(endpoint.host):\(endpoint.port): \(error)",
                hint: "allow outbound TCP to \(endpoint.host) port \(endpoint.port) (APNs: 443 or 2197) "
                    + "in firewalls and proxies, and check DNS"
            )
        }
    }

    private func tlsFailure(
        _ error: any Error,
        endpoint: APNSSettings.Endpoint,
        settings: APNSSettings,
        scope: String
    ) -> DoctorCheck {
        let detail =
            (error as? HTTP2Error).map { error in
                [error.message, error.cause.map { "\($0)" }].compactMap { $0 }.joined(separator: ": ")
            } ?? "\(error)"
        let hint: String
        if detail.contains("ALPN") {
            hint = "the endpoint must speak HTTP/2: point apns.endpoint at APNs (or the simulator), not a proxy"
        } else if settings.caFile == nil {
            hint =
                "install Apple's roots (AAA Certificate Services, USERTrust RSA) in the system store "
                + "(ca-certificates), or set ca_file to the CA of a simulator or proxy"
        } else {
            hint = "ca_file must be the PEM CA that signed the server's certificate for \(endpoint.host)"
        }
        return DoctorCheck(.fail, "\(scope) tls", "\(endpoint): TLS or HTTP/2 setup failed: \(detail)", hint: hint)
    }

    // MARK: The binary protocol

    /// The feedback service of a binary app: TCP only. The service writes its entries to any client that completes
    /// the TLS handshake and then forgets them, so a TLS check here would take tokens the bridge's poller never
    /// publishes; doctor must be safe to run against production. The certificate is proven by the gateway check.
    private func checkFeedback(_ settings: APNSSettings, scope: String) async -> DoctorCheck {
        let name = "\(scope) feedback service"
        let endpoint = settings.binary.feedback.endpoint ?? FeedbackSettings.appleFeedback(settings.environment)
        let tcp = await self.checkTCP(endpoint, scope: scope)
        guard tcp.status == .ok else {
            return DoctorCheck(
                .fail, name, tcp.found,
                hint: (tcp.hint ?? "") + "; or set binary.feedback.endpoint, or binary.feedback.enabled: false")
        }
        return DoctorCheck(
            .ok, name,
            "\(endpoint.host):\(endpoint.port) connects over TCP (TLS not tried: the service hands its entries to any "
                + "client that completes the handshake, and only the bridge's poller publishes them)")
    }

    /// A provider on the legacy binary protocol: TCP to its gateway, then one probe notification to a made-up
    /// token over TLS with the client certificate. The protocol never confirms success: no error packet within
    /// the quiet window, or status 8 (invalid token) for the made-up token, both prove the connection and the
    /// certificate work.
    private func checkBinary(_ settings: APNSSettings, credentials: Credentials, scope: String) async -> [DoctorCheck] {
        let gateway = settings.binary.gateway ?? BinaryProtocolSettings.appleGateway(settings.environment)
        let tcp = await self.checkTCP(gateway, scope: scope)
        guard tcp.status == .ok else {
            return [
                tcp,
                DoctorCheck(.warn, "\(scope) binary gateway", "not checked: no TCP connection", hint: "fix TCP first"),
            ]
        }
        guard case .certificate(let certificate) = credentials else {
            return [
                tcp,
                DoctorCheck(
                    .warn, "\(scope) binary gateway", "not checked: the certificate does not load",
                    hint: "fix the credentials first"),
            ]
        }
        var configuration = BinaryClientConfiguration(host: gateway.host, port: gateway.port, credentials: certificate)
        configuration.format = settings.binary.format
        configuration.quietWindow = settings.binary.quietWindow
        configuration.maxResendsWithoutError = 0
        configuration.connectTimeout = self.options.apnsTimeout
        let name = "\(scope) binary gateway"
        configuration.additionalTrustRootsPEMFile = settings.caFile
        let client: BinaryClient
        do {
            client = try BinaryClient(configuration: configuration, eventLoopGroup: self.eventLoopGroup)
        } catch {
            return [
                tcp, DoctorCheck(.fail, name, "cannot set up TLS for the gateway: \(error)", hint: "check ca_file"),
            ]
        }
        let probe = Notification(
            deviceToken: Self.probeDeviceToken, topic: "probe", pushType: .alert, priority: .powerConsiderate,
            expirationEpochSeconds: 0, id: UUID(), payload: Array(#"{"aps":{}}"#.utf8))
        let result = await client.send(probe)
        await client.close()
        let endpoint = "\(gateway.host):\(gateway.port)"
        switch result {
        case .answered(let answer) where answer.status == 200:
            return [
                tcp,
                DoctorCheck(
                    .ok, name,
                    "\(endpoint): TLS with the client certificate; a probe notification got no error packet within "
                        + "\(settings.binary.quietWindow)"),
            ]
        case .answered(let answer) where answer.reason == .badDeviceToken:
            return [
                tcp,
                DoctorCheck(
                    .ok, name,
                    "\(endpoint): TLS with the client certificate; the probe's made-up token was answered status 8 "
                        + "(invalid token), as a working gateway does"),
            ]
        case .answered(let answer):
            return [
                tcp,
                DoctorCheck(
                    .fail, name,
                    "\(endpoint): the gateway refused the probe: \(answer.reason?.rawValue ?? "\(answer.status)")",
                    hint: "a topic refusal means the certificate is not a push certificate for the app"),
            ]
        case .failed(let failure):
            let detail = if case .unreachable(let why) = failure { why } else { failure.reason }
            return [
                tcp,
                DoctorCheck(
                    .fail, name, "\(endpoint): \(detail)",
                    hint: "the gateway must accept this client certificate over TLS (and ca_file must be its CA)"),
            ]
        }
    }

    // MARK: Broadcast channels

    /// The routes of `app` whose `channel_id` is a fixed channel (no `{{` tag), in configuration order.
    func staticChannelRoutes(app: String?) -> [(index: Int, route: RouteSpec, channelID: String)] {
        self.configuration.routes.enumerated().compactMap { index, route in
            guard route.app == app, let channelID = route.channelID, !channelID.contains("{{") else { return nil }
            return (index, route, channelID)
        }
    }

    /// One line per route of `app` that names a fixed broadcast channel: the channel exists for the route's
    /// bundle ID, read through Apple's channel management API at the app's management endpoint
    /// (`broadcast.management_endpoint`, else Apple's host of the environment) with the app's credentials. A
    /// channel that does not exist (deleted, never created, or created in the other environment) fails, naming
    /// the route and the channel: every broadcast of that route would be rejected `ChannelNotRegistered`.
    /// Channels rendered from events cannot be known here and are not checked.
    public func checkChannels(_ settings: APNSSettings, scope: String, app: String?) async -> [DoctorCheck] {
        let routes = self.staticChannelRoutes(app: app)
        guard !routes.isEmpty, settings.providerProtocol == .http2 else { return [] }
        let endpoint = settings.effectiveManagementEndpoint
        let authentication: APNSAuthentication
        switch self.checkCredentials(settings, scope: scope, routes: []).0 {
        case .token(let key): authentication = .token(ProviderTokenSource(key: key, clock: self.clock))
        case .certificate(let credentials): authentication = .certificate(credentials)
        case .unusable:
            return routes.map { index, route, _ in
                DoctorCheck(
                    .warn, "\(scope) channel \(route.name)", "not checked: the credentials do not load",
                    hint: "fix the credentials first")
            }
        }
        var logger = Logger(label: "pushbridge.doctor.channels")
        logger.logLevel = .critical
        let client = ChannelManagementClient(
            configuration: APNSClientConfiguration(
                endpoint: APNSClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port),
                authentication: authentication, connectionCount: 1, requestTimeout: self.options.apnsTimeout,
                connectTimeout: self.options.apnsTimeout, additionalTrustRootsPEMFile: settings.caFile),
            eventLoopGroup: self.eventLoopGroup, logger: logger)
        var checks: [DoctorCheck] = []
        for (index, route, channelID) in routes {
            let name = "\(scope) channel \(route.name)"
            let bundleID = Self.bundleID(of: route)
            do {
                let read = try await client.read(bundleID: bundleID, channelID: channelID)
                checks.append(
                    DoctorCheck(
                        .ok, name,
                        "channel \(channelID) of \(bundleID) exists at \(endpoint) (storage policy "
                            + "\(read.value.storagePolicy.rawValue))"))
            } catch {
                checks.append(
                    self.channelFailure(
                        error, route: route, index: index, channelID: channelID,
                        bundleID: bundleID, endpoint: endpoint, name: name))
            }
        }
        await client.shutdown()
        return checks
    }

    private func channelFailure(
        _ error: ChannelManagementError, route: RouteSpec, index: Int, channelID: String, bundleID: String,
        endpoint: APNSSettings.Endpoint, name: String
    ) -> DoctorCheck {
        let app = route.app.map { " --app \($0)" } ?? ""
        switch error.reason {
        case .channelNotRegistered?:
            return DoctorCheck(
                .fail, name,
                "route \(route.name) sends to channel \(channelID), which does not exist for \(bundleID) at "
                    + "\(endpoint) (ChannelNotRegistered): every broadcast of the route would be rejected",
                hint: "create one with `pushbridge channels create\(app) --topic \(bundleID)` and write the printed ID "
                    + "into routes[\(index)].channel_id; channels belong to one environment, so check that "
                    + "apns.environment is the one the channel was created in")
        case .badChannelId?:
            return DoctorCheck(
                .fail, name, "route \(route.name): APNs calls \(channelID) malformed (BadChannelId)",
                hint: "write the base64 ID that `pushbridge channels create` printed into routes[\(index)].channel_id")
        case .featureNotEnabled?:
            return DoctorCheck(
                .fail, name, "route \(route.name): broadcast is not enabled for \(bundleID) (FeatureNotEnabled)",
                hint: "enable the Broadcast Capability for the app ID on developer.apple.com (Identifiers)")
        default:
            return DoctorCheck(
                .fail, name,
                "route \(route.name): could not read channel \(channelID) of \(bundleID) at \(endpoint): "
                    + "\(error)",
                hint: "check broadcast.management_endpoint (default Apple's management host of the environment), "
                    + "that this host reaches it, and that the credentials cover \(bundleID)")
        }
    }

    // MARK: The probe request

    private func probe(
        _ connection: HTTP2ClientConnection,
        credentials: Credentials,
        scope: String,
        routes: [RouteSpec]
    ) async -> [DoctorCheck] {
        let name = "\(scope) auth"
        var headers = [
            HTTP2Header("apns-push-type", "alert"),
            HTTP2Header("apns-priority", "5"),
            HTTP2Header("apns-expiration", "0"),
        ]
        if let route = routes.first {
            headers.append(HTTP2Header("apns-topic", Self.bundleID(of: route)))
        }
        let what: String
        switch credentials {
        case .token(let key):
            let issuedAt = Int64(self.clock.now().timeIntervalSince1970.rounded(.down))
            do {
                let jwt = try ProviderTokenJWT.sign(
                    keyID: key.keyID, teamID: key.teamID, issuedAtEpochSeconds: issuedAt, privateKey: key.privateKey)
                headers.append(HTTP2Header("authorization", "bearer \(jwt.compact)", indexing: .never))
            } catch {
                return [DoctorCheck(.fail, name, "cannot sign a provider token: \(error)", hint: "replace the .p8 key")]
            }
            what = "provider token"
        case .certificate:
            what = "client certificate"
        case .unusable:
            return [
                DoctorCheck(.warn, name, "not checked: the credentials do not load", hint: "fix the credentials first"),
                DoctorCheck(
                    .warn, "\(scope) clock", "not checked: no probe request", hint: "fix the credentials first"),
            ]
        }
        let response: HTTP2Response
        do {
            response = try await connection.send(
                HTTP2Request(
                    method: "POST", path: "/3/device/\(Self.probeDeviceToken)", headers: headers,
                    body: Array(#"{"aps":{}}"#.utf8)
                )
            )
        } catch {
            return [
                DoctorCheck(
                    .fail, name, "no answer to the probe request: \(error)",
                    hint: "APNs should answer at once; check proxies between this host and APNs"
                ),
                DoctorCheck(.warn, "\(scope) clock", "not checked: no answer", hint: "fix the connection first"),
            ]
        }
        let answer = APNSResponse(
            status: response.status,
            headers: response.headers.map { (name: $0.name, value: $0.value) },
            body: response.body
        )
        return [
            self.judge(answer, what: what, name: name),
            self.checkClock(response.headers.first("date"), scope: scope, answer: answer),
        ]
    }

    /// What the probe's answer says about the credentials.
    func judge(_ answer: APNSResponse, what: String, name: String) -> DoctorCheck {
        let said = "HTTP \(answer.status)\(answer.reason.map { " \($0.rawValue)" } ?? "")"
        switch (answer.status, answer.reason) {
        case (200, _), (410, _), (400, .badDeviceToken?):
            return DoctorCheck(.ok, name, "APNs accepts the \(what) (the all-zero probe token got \(said))")
        case (400, .topicDisallowed?), (400, .badTopic?), (400, .deviceTokenNotForTopic?):
            return DoctorCheck(
                .fail, name, "the \(what) is accepted, but not for the routes' topic: \(said)",
                hint: "the routes' topic must be a bundle ID of the key's team (or the certificate's app)"
            )
        case (400, _):
            return DoctorCheck(
                .warn, name, "the \(what) passed, but the probe got \(said)", hint: "see docs/operations.md#doctor")
        case (403, let reason):
            return DoctorCheck(.fail, name, "APNs refuses the \(what): \(said)", hint: Self.hint(for: reason))
        default:
            return DoctorCheck(
                .warn, name, "APNs answered \(said); the \(what) could not be judged",
                hint: "run doctor again later (APNs busy or shutting down)"
            )
        }
    }

    private static func hint(for reason: Reason?) -> String {
        switch reason {
        case .invalidProviderToken?:
            "key_file, key_id and team_id must belong together: the key ID of the .p8, the team that owns it"
        case .expiredProviderToken?: "the token was fresh, so this host's clock is off by over an hour: run NTP"
        case .badEnvironmentKeyIdInToken?, .badEnvironmentKeyInToken?:
            "the key is restricted to the other environment: fix environment or use a key for this one"
        case .missingProviderToken?: "configure auth (type token) or a client certificate"
        case .badCertificate?: "the certificate is not an APNs certificate, or revoked: create a new one"
        case .badCertificateEnvironment?: "the certificate is for the other environment: fix environment"
        default: "see Apple's reason table in docs/operations.md"
        }
    }

    /// The local clock against the server's `date` header, by the JWT rules (`iat` must not be in the future;
    /// an hour old is expired).
    func checkClock(_ dateHeader: String?, scope: String, answer: APNSResponse) -> DoctorCheck {
        let name = "\(scope) clock"
        let hint = "synchronise this host's clock (chrony or systemd-timesyncd with NTP)"
        guard let dateHeader, let serverDate = HTTPDate.parse(dateHeader) else {
            if answer.reason == .expiredProviderToken {
                return DoctorCheck(
                    .fail, name, "APNs called a fresh token expired: the clock is off by > 1 h", hint: hint)
            }
            return DoctorCheck(
                .warn, name, "skew not measured: the server sent no date header",
                hint: "compare with NTP: chronyc tracking or timedatectl timesync-status"
            )
        }
        let skew = self.clock.now().timeIntervalSince(serverDate)
        let direction = skew >= 0 ? "ahead of" : "behind"
        let found = "local clock \(Self.text(seconds: abs(skew))) \(direction) the server's date (\(dateHeader))"
        if abs(skew) > Double(self.options.clockSkewFailure.components.seconds) {
            let effect =
                skew > 0
                ? "tokens look issued in the future: APNs refuses them"
                : "tokens look old: APNs calls them expired early"
            return DoctorCheck(.fail, name, "\(found); \(effect)", hint: hint)
        }
        if abs(skew) > Double(self.options.clockSkewWarning.components.seconds) {
            return DoctorCheck(.warn, name, found, hint: hint)
        }
        return DoctorCheck(.ok, name, found)
    }

    private static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return self.text(seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }

    private static func text(seconds: Double) -> String {
        if seconds < 1 { return "\(Int(seconds * 1000)) ms" }
        if seconds < 120 { return "\(Int(seconds)) s" }
        return "\(Int(seconds / 60)) min"
    }
}
