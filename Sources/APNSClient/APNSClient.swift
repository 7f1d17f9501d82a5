import APNSCore
import HTTP2
import Logging
import NIOCore
import NIOPosix

/// Sends notifications to APNs over a pool of HTTP/2 connections.
///
/// ``send(_:)`` never throws: every outcome is an ``APNSResult``. Requests the server did not process
/// (above a GOAWAY's last stream, or on a connection lost before the answer) are sent again on another
/// connection, up to ``APNSClientConfiguration/maxResends`` times. With token authentication one provider token
/// is shared by every connection and renewed by Apple's rules (see ``ProviderTokenSource``); a 403
/// `ExpiredProviderToken` renews it at once and the request is sent again.
public final class APNSClient: Sendable {
    /// The configuration in force.
    public let configuration: APNSClientConfiguration
    private let pool: ConnectionPool
    private let logger: Logger

    /// Creates a client. Connections are opened on the first send.
    public init(
        configuration: APNSClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.apns")
    ) {
        self.configuration = configuration
        self.logger = logger
        var tls = HTTP2ClientTLS(
            additionalTrustRootsPEMFile: configuration.additionalTrustRootsPEMFile,
            trustSystemRoots: configuration.trustSystemRoots
        )
        if case .certificate(let credentials) = configuration.authentication {
            tls.clientCertificateChain = credentials.certificateChain
            tls.clientPrivateKey = credentials.privateKey
        }
        let connectionConfiguration = HTTP2ClientConfiguration(
            host: configuration.endpoint.host,
            port: configuration.endpoint.port,
            tls: tls,
            maxConcurrentStreams: configuration.maxConcurrentStreamsPerConnection,
            requestTimeout: configuration.requestTimeout,
            connectTimeout: configuration.connectTimeout
        )
        self.pool = ConnectionPool(
            size: configuration.connectionCount,
            configuration: connectionConfiguration,
            reconnectInitialDelay: configuration.reconnectInitialDelay,
            reconnectMaximumDelay: configuration.reconnectMaximumDelay,
            eventLoopGroup: eventLoopGroup,
            logger: logger
        )
    }

    /// Connections open and accepting requests now (`pushbridge_apns_connections`).
    public var openConnections: Int { self.pool.openConnections }

    /// Sends `notification` and returns APNs' answer or why there was none.
    ///
    /// A notification that breaks Apple's rules is answered locally with the reason APNs would give
    /// (when ``APNSClientConfiguration/validatesLocally``), without a request.
    public func send(_ notification: Notification) async -> APNSResult {
        if self.configuration.validatesLocally, let reason = NotificationValidation.validate(notification) {
            return .answered(APNSResponse(status: reason.status ?? 400, apnsID: notification.apnsID, reason: reason))
        }
        var request = HTTP2Request(
            method: "POST",
            path: notification.path,
            headers: notification.apnsHeaders.map { HTTP2Header($0.name, $0.value) },
            body: notification.payload
        )
        var token: ProviderTokenJWT?
        if case .token(let source) = self.configuration.authentication {
            do {
                token = try source.currentToken()
            } catch {
                return .failed(.unreachable("cannot sign the provider token: \(error)"))
            }
            request.headers.append(HTTP2Header("authorization", "bearer \(token!.compact)", indexing: .never))
        }

        var renewedToken = false
        var lostResends = 0
        var unprocessedResends = 0
        while true {
            let result = await self.attempt(request)
            switch result {
            case .resend(let code):
                // A request the server did not process is always safe to send again; one lost with its connection
                // may have been processed, so those resends are bounded by maxResends.
                if code == .notProcessed {
                    unprocessedResends += 1
                } else {
                    lostResends += 1
                }
                if lostResends > self.configuration.maxResends || unprocessedResends > Self.maximumUnprocessedResends {
                    self.logger.debug("apns resends exhausted", metadata: self.metadata(notification, code.rawValue))
                    return .failed(.connectionLost)
                }
                self.logger.debug("apns request re-sent", metadata: self.metadata(notification, code.rawValue))
            case .done(.answered(let response)) where response.reason == .expiredProviderToken && !renewedToken:
                guard case .token(let source) = self.configuration.authentication, let used = token,
                    let fresh = try? source.tokenAfterExpiry(of: used)
                else { return .answered(response) }
                renewedToken = true
                token = fresh
                request.headers.removeAll { $0.name == "authorization" }
                request.headers.append(HTTP2Header("authorization", "bearer \(fresh.compact)", indexing: .never))
                self.logger.info("apns provider token renewed after ExpiredProviderToken")
            case .done(let final):
                return final
            }
        }
    }

    /// Closes every connection. Sends after this fail with `unreachable`.
    public func shutdown() async {
        await self.pool.shutdown()
    }

    /// A bound on re-sending requests the server refused unprocessed (GOAWAY), against a server that refuses
    /// everything.
    static let maximumUnprocessedResends = 100

    private enum Attempt {
        case done(APNSResult)
        case resend(HTTP2Error.Code)
    }

    private func attempt(_ request: HTTP2Request) async -> Attempt {
        let deadline = ContinuousClock.now + self.configuration.requestTimeout
        guard let connection = await self.pool.lease(deadline: deadline) else {
            return .done(.failed(.unreachable(self.pool.lastConnectError ?? "no connection to APNs could be opened")))
        }
        defer { self.pool.release(connection) }
        do {
            let response = try await connection.send(request)
            return .done(
                .answered(
                    APNSResponse(
                        status: response.status,
                        headers: response.headers.map { (name: $0.name, value: $0.value) },
                        body: response.body
                    )
                )
            )
        } catch let error as HTTP2Error {
            switch error.code {
            case .notProcessed, .closed:
                return .resend(.notProcessed)
            case .connectionLost:
                return .resend(.connectionLost)
            case .timeout:
                return .done(.failed(.timeout))
            case .malformedResponse:
                return .done(.failed(.malformedResponse(error.message)))
            case .cancelled:
                return .done(.failed(.connectionLost))
            case .invalidRequest:
                return .done(.failed(.malformedResponse("the request was refused locally: \(error.message)")))
            case .connectFailed, .serverStartFailed:
                return .done(.failed(.unreachable(error.message)))
            }
        } catch {
            return .done(.failed(.connectionLost))
        }
    }

    private func metadata(_ notification: Notification, _ why: String) -> Logger.Metadata {
        [
            "apns.token": "\(notification.deviceToken.prefix(8))",
            "apns.id": "\(notification.apnsID)",
            "apns.why": "\(why)",
        ]
    }
}
