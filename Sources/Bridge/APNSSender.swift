import APNSClient
import APNSCore
import Configuration
import Logging
import NIOCore
import NIOPosix

/// The pipeline's sender on APNs: one ``APNSClient`` (a pool of HTTP/2 connections with its own credentials)
/// for the `apns` block and one per entry under `apps`.
public final class APNSSender: ManagedSender {
    private let defaultClient: APNSClient
    private let appClients: [String: APNSClient]

    /// Creates clients for the default block and every app. Connections open on the first send.
    public init(defaultClient: APNSClient, appClients: [String: APNSClient]) {
        self.defaultClient = defaultClient
        self.appClients = appClients
    }

    /// Loads the credentials of `configuration.apns` and every app and creates their clients. Throws a
    /// ``CredentialError`` naming the file and the cause (never a secret).
    public convenience init(
        configuration: BridgeConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws {
        var apps: [String: APNSClient] = [:]
        for (name, settings) in configuration.apps {
            apps[name] = try APNSClient(
                configuration: Self.clientConfiguration(settings), eventLoopGroup: eventLoopGroup,
                logger: Self.logger(logger, app: name)
            )
        }
        self.init(
            defaultClient: try APNSClient(
                configuration: Self.clientConfiguration(configuration.apns), eventLoopGroup: eventLoopGroup,
                logger: Self.logger(logger, app: "default")
            ),
            appClients: apps
        )
    }

    /// The client configuration for one `apns`-shaped block.
    public static func clientConfiguration(_ settings: APNSSettings) throws -> APNSClientConfiguration {
        let authentication: APNSAuthentication
        switch settings.auth {
        case .token(let keyFile, let keyID, let teamID):
            let key = try SigningKey.load(p8Path: keyFile, keyID: keyID, teamID: teamID)
            authentication = .token(ProviderTokenSource(key: key))
        case .pkcs12(let file, let password):
            authentication = .certificate(try CertificateCredentials.load(p12Path: file, password: password?.value ?? ""))
        case .pem(let certificateFile, let keyFile):
            authentication = .certificate(
                try CertificateCredentials.load(certificatePEMPath: certificateFile, keyPEMPath: keyFile)
            )
        }
        let endpoint = settings.effectiveEndpoint
        return APNSClientConfiguration(
            endpoint: APNSClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port),
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

    public func send(_ notification: Notification, app: String?) async -> APNSResult {
        await (app.flatMap { self.appClients[$0] } ?? self.defaultClient).send(notification)
    }

    public func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    {
        (app.flatMap { self.appClients[$0] } ?? self.defaultClient).send(notification, completion: completion)
    }

    public func send(contentsOf batch: [SendRequest]) {
        guard !self.appClients.isEmpty else {
            return self.defaultClient.send(
                contentsOf: batch.map { APNSClient.Submission(notification: $0.notification, completion: $0.completion) })
        }
        var byClient: [ObjectIdentifier: (client: APNSClient, items: [APNSClient.Submission])] = [:]
        for request in batch {
            let client = request.app.flatMap { self.appClients[$0] } ?? self.defaultClient
            byClient[ObjectIdentifier(client), default: (client, [])].items.append(
                APNSClient.Submission(notification: request.notification, completion: request.completion))
        }
        for (client, items) in byClient.values {
            client.send(contentsOf: items)
        }
    }

    public var openConnections: Int {
        self.appClients.values.reduce(self.defaultClient.openConnections) { $0 + $1.openConnections }
    }

    public func validate(_ notification: Notification, payloadIsJSONObject: Bool) -> Reason? {
        NotificationValidation.validate(notification, payloadIsJSONObject: payloadIsJSONObject)
    }

    public func shutdown() async {
        await self.defaultClient.shutdown()
        for client in self.appClients.values { await client.shutdown() }
    }
}
