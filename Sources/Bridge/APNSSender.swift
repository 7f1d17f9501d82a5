import APNSClient
import APNSCore
import BinaryProvider
import BridgeCore
import Configuration
import EgressProxy
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The pipeline's sender on APNs: one provider for the `apns` block and one per entry under `apps`. A provider
/// is an ``APNSClient`` (a pool of HTTP/2 connections with its own credentials) or, for `protocol: binary`, the
/// legacy binary protocol's ``BinaryClient``s (one per connection, taken in turn).
package final class APNSSender: ManagedSender {
    /// One app's client(s).
    package enum Provider: Sendable {
        /// Apple's HTTP/2 API.
        case http2(APNSClient)
        /// The binary provider protocol: the connections' clients, and the payload limit and format checked
        /// locally.
        case binary([BinaryClient], format: BinaryFormat, payloadLimitBytes: Int, next: BinaryRotation)
    }

    /// Which binary connection takes the next notification.
    package final class BinaryRotation: Sendable {
        private let counter = Atomic<Int>(0)

        /// A new rotation.
        package init() {}

        func next(of count: Int) -> Int { (self.counter.add(1, ordering: .relaxed).oldValue & Int.max) % count }
    }

    private let defaultProvider: Provider
    private let appProviders: [String: Provider]
    package let sendsOnlyHTTP2: Bool

    /// Creates a sender over HTTP/2 clients. Connections open on the first send.
    package convenience init(defaultClient: APNSClient, appClients: [String: APNSClient]) {
        self.init(defaultProvider: .http2(defaultClient), appProviders: appClients.mapValues { .http2($0) })
    }

    /// Creates a sender over the given providers.
    package init(defaultProvider: Provider, appProviders: [String: Provider]) {
        self.defaultProvider = defaultProvider
        self.appProviders = appProviders
        self.sendsOnlyHTTP2 = ([defaultProvider] + appProviders.values).allSatisfy {
            if case .http2 = $0 { return true }
            return false
        }
    }

    /// Loads the credentials of `configuration.apns` and every app and creates their clients. Throws a
    /// ``CredentialError`` naming the file and the cause (never a secret).
    package convenience init(
        configuration: BridgeConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws {
        var apps: [String: Provider] = [:]
        for (name, settings) in configuration.apps {
            apps[name] = try Self.provider(
                settings, eventLoopGroup: eventLoopGroup, logger: Self.logger(logger, app: name))
        }
        self.init(
            defaultProvider: try Self.provider(
                configuration.apns, eventLoopGroup: eventLoopGroup, logger: Self.logger(logger, app: "default")),
            appProviders: apps
        )
    }

    /// The provider for one `apns`-shaped block.
    package static func provider(
        _ settings: APNSSettings, eventLoopGroup: any EventLoopGroup, logger: Logger
    ) throws -> Provider {
        let configuration = try Self.clientConfiguration(settings)
        switch settings.providerProtocol {
        case .http2:
            return .http2(APNSClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger))
        case .binary:
            guard case .certificate(let credentials) = configuration.authentication else {
                // Configuration refuses token auth with protocol: binary; this is the same rule, here for callers
                // that build settings in code.
                throw CredentialError(
                    code: .invalidCertificate, file: "",
                    cause: "the binary protocol takes certificate authentication only")
            }
            let gateway = settings.binary.gateway ?? BinaryProtocolSettings.appleGateway(settings.environment)
            var binary = BinaryClientConfiguration(host: gateway.host, port: gateway.port, credentials: credentials)
            binary.additionalTrustRootsPEMFile = settings.caFile
            binary.proxy = settings.proxy.proxy(forHost: gateway.host)
            binary.format = settings.binary.format
            binary.payloadLimit = settings.binary.payloadLimitBytes
            binary.quietWindow = settings.binary.quietWindow
            // The same bounds as the HTTP/2 client's: a request that gets no answer, a write the gateway does not
            // read, and the reconnect delays.
            binary.writeTimeout = settings.requestTimeout
            binary.reconnectInitialDelay = configuration.reconnectInitialDelay
            binary.reconnectMaximumDelay = configuration.reconnectMaximumDelay
            binary.maxUnconfirmed = settings.binary.maxUnconfirmed
            binary.maxResendsWithoutError = settings.binary.maxResendsWithoutError
            let clients = try (0..<settings.connections).map { _ in
                try BinaryClient(configuration: binary, eventLoopGroup: eventLoopGroup)
            }
            return .binary(
                clients, format: binary.format, payloadLimitBytes: binary.payloadLimitBytes, next: BinaryRotation())
        }
    }

    /// The client configuration for one `apns`-shaped block.
    package static func clientConfiguration(_ settings: APNSSettings) throws -> APNSClientConfiguration {
        let authentication: APNSAuthentication
        switch settings.auth {
        case .token(let keyFile, let keyID, let teamID):
            let key = try SigningKey.load(p8Path: keyFile, keyID: keyID, teamID: teamID)
            authentication = .token(ProviderTokenSource(key: key))
        case .pkcs12(let file, let password):
            authentication = .certificate(
                try CertificateCredentials.load(p12Path: file, password: password?.value ?? ""))
        case .pem(let certificateFile, let keyFile):
            authentication = .certificate(
                try CertificateCredentials.load(certificatePEMPath: certificateFile, keyPEMPath: keyFile)
            )
        }
        let endpoint = settings.effectiveEndpoint
        return APNSClientConfiguration(
            endpoint: APNSClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port),
            proxy: settings.proxy.proxy(forHost: endpoint.host),
            authentication: authentication,
            connectionCount: settings.connections,
            maxConcurrentStreamsPerConnection: settings.maxConcurrentStreams,
            requestTimeout: settings.requestTimeout,
            additionalTrustRootsPEMFile: settings.caFile,
            // The pipeline validates first, so local faults get a null http_status in their outcome.
            validatesLocally: false
        )
    }

    private static func logger(_ base: Logger, app: String) -> Logger {
        var logger = Logger(label: "pushbridge.apns")
        logger.logLevel = base.logLevel
        logger[metadataKey: "apns.app"] = "\(app)"
        return logger
    }

    private func provider(_ app: String?) -> Provider {
        app.flatMap { self.appProviders[$0] } ?? self.defaultProvider
    }

    package func send(contentsOf batch: consuming [SendRequest]) {
        // One HTTP/2 client for every app (the usual case): the batch goes to it whole. Choosing the provider per
        // notification copied it, a retain and a release per notification of the client every answer's thread
        // counts too.
        if self.appProviders.isEmpty, case .http2(let client) = self.defaultProvider {
            var submissions: [APNSClient.Submission] = []
            submissions.reserveCapacity(batch.count)
            for index in batch.indices {
                submissions.append(
                    APNSClient.Submission(notification: batch[index].notification, completion: batch[index].completion))
            }
            client.send(contentsOf: submissions)
            return
        }
        // Grouped per client, so each client's event loop is woken once for its share.
        var http2 = IdentityGroups<APNSClient, APNSClient.Submission>(expecting: batch.count)
        var binary = IdentityGroups<BinaryClient, APNSClient.Submission>(expecting: batch.count)
        for index in batch.indices {
            let submission = APNSClient.Submission(
                notification: batch[index].notification, completion: batch[index].completion)
            switch self.provider(batch[index].app) {
            case .http2(let client):
                http2.append(submission, to: client)
            case .binary(let clients, _, _, let next):
                binary.append(submission, to: clients[next.next(of: clients.count)])
            }
        }
        for group in http2.groups {
            group.key.send(contentsOf: group.items)
        }
        for group in binary.groups {
            group.key.send(contentsOf: group.items)
        }
    }

    private var providers: [Provider] { [self.defaultProvider] + Array(self.appProviders.values) }

    package var openConnections: Int {
        self.providers.reduce(0) { total, provider in
            switch provider {
            case .http2(let client): total + client.openConnections
            case .binary(let clients, _, _, _): clients.reduce(total) { $0 + $1.openConnections }
            }
        }
    }

    package func validate(_ notification: Notification, payloadIsJSONObject: Bool, app: String?) -> Reason? {
        switch self.provider(app) {
        case .http2:
            return NotificationValidation.validate(notification, payloadIsJSONObject: payloadIsJSONObject)
        case .binary(_, let format, let payloadLimitBytes, _):
            // The binary protocol carries token, payload, expiration and priority only: Apple's HTTP/2 header
            // rules (topic, push type, collapse id) do not apply, its own limits do.
            return BinaryFrame.validate(notification, format: format, payloadLimitBytes: payloadLimitBytes)?.reason
        }
    }

    package func providerProtocol(app: String?) -> APNSSettings.ProviderProtocol {
        switch self.provider(app) {
        case .http2: .http2
        case .binary: .binary
        }
    }

    /// Runs every HTTP/2 client until ``shutdown()`` (binary clients run on their own channels).
    package func run() async {
        await withDiscardingTaskGroup { group in
            for case .http2(let client) in self.providers {
                group.addTask { await client.run() }
            }
        }
    }

    package func shutdown() async {
        for provider in self.providers {
            switch provider {
            case .http2(let client): await client.shutdown()
            case .binary(let clients, _, _, _): for client in clients { await client.close() }
            }
        }
    }
}
