import BinaryProvider
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// How the simulated binary gateway misbehaves, counted over all its connections.
package struct BinaryGatewayBehaviour: Sendable {
    /// Tokens (lowercase hex) answered with status 8 (invalid token); the feedback service then reports them.
    package var unregisteredTokens: Set<String> = []
    /// The notification (1-based, over all connections) answered with status 1 (processing error).
    package var processingErrorAt: Int?
    /// After this many notifications (over all connections) the gateway answers status 10 (shutdown) naming the
    /// last one it processed, once.
    package var shutdownAfter: Int?
    /// After this many notifications (over all connections) the gateway drops the connection without a packet,
    /// once.
    package var dropAfter: Int?
    /// The payload limit (status 7 above it).
    package var payloadLimitBytes = BinaryFrame.framedPayloadLimitBytes
    /// Entries the feedback service reports on its first read besides the tokens the gateway refuses
    /// (`binary_gateway.feedback_tokens`): tokens known only to the feedback service.
    package var feedbackTokens: [FeedbackTuple] = []
    /// How many of the latest processed tokens and error packets the statistics keep (counts cover all of them):
    /// a gateway that runs for long must not grow with its traffic.
    package var recentLimit = BinaryGateway.Statistics.defaultRecentLimit

    /// A gateway that accepts everything well-formed.
    package init() {}
}

/// The simulator's binary provider gateway: TLS with a client certificate signed by the given CA, Apple's
/// framing read by ``BinaryFrameDecoder``, error packets for bad notifications and for the behaviour's knobs,
/// and the connection closed after every packet, as Apple's gateways did.
package final class BinaryGateway: Sendable {
    /// What the gateway accepted and answered, for tests and the statistics.
    package struct Statistics: Sendable, Hashable {
        /// How many of the latest processed tokens and error packets are kept unless the behaviour says otherwise
        /// (``BinaryGatewayBehaviour/recentLimit``): far more than a test sends, and about 2 MB of tokens at most.
        package static let defaultRecentLimit = 10_000

        /// The latest processed tokens.
        private var processedTokens: RecentEntries<String>
        /// The latest error packets.
        private var writtenErrorPackets: RecentEntries<BinaryErrorResponse>

        /// The device tokens (hex) of the latest notifications the gateway processed, in order (at most
        /// ``BinaryGatewayBehaviour/recentLimit``, oldest first): a token sent twice appears twice.
        package var processed: [String] { self.processedTokens.elements }
        /// Notifications processed, all of them (``processed`` keeps only the latest).
        package var processedCount: Int { self.processedTokens.total }
        /// The latest error packets written, in order (at most ``BinaryGatewayBehaviour/recentLimit``).
        package var errorPackets: [BinaryErrorResponse] { self.writtenErrorPackets.elements }
        /// Error packets written, all of them (``errorPackets`` keeps only the latest).
        package var errorPacketCount: Int { self.writtenErrorPackets.total }
        /// Connections accepted.
        package var connections = 0
        /// Connections dropped without a packet by ``BinaryGatewayBehaviour/dropAfter``.
        package var drops = 0
        /// Feedback entries handed to the feedback service's readers (``takeFeedback()``).
        package var feedbackReported = 0

        /// Empty statistics keeping the latest `recentLimit` tokens and error packets.
        init(recentLimit: Int) {
            self.processedTokens = RecentEntries(limit: recentLimit)
            self.writtenErrorPackets = RecentEntries(limit: recentLimit)
        }

        /// Counts a notification processed for `token`.
        mutating func recordProcessed(_ token: String) {
            self.processedTokens.append(token)
        }

        /// Counts an error packet written.
        mutating func recordErrorPacket(_ response: BinaryErrorResponse) {
            self.writtenErrorPackets.append(response)
        }
    }

    private struct State {
        var statistics: Statistics
        var read = 0
        var shutdownDone = false
        var dropDone = false
        /// What the feedback service reports on its next read, in the order the tokens were refused; each
        /// token once (Apple's service reported a token once per read).
        var feedback: [FeedbackTuple] = []
        var feedbackTokens: Set<[UInt8]> = []

        mutating func addFeedback(_ tuple: FeedbackTuple) {
            guard self.feedbackTokens.insert(tuple.token).inserted else { return }
            self.feedback.append(tuple)
        }
    }

    private let behaviour: BinaryGatewayBehaviour
    private let state: Mutex<State>
    private let listener = Mutex<(any Channel)?>(nil)

    private init(behaviour: BinaryGatewayBehaviour) {
        self.behaviour = behaviour
        var state = State(statistics: Statistics(recentLimit: behaviour.recentLimit))
        for tuple in behaviour.feedbackTokens { state.addFeedback(tuple) }
        self.state = Mutex(state)
    }

    /// Takes what the feedback service reports: every token refused with status 8 since the last call (with the
    /// time it was refused), and the scenario's feedback-only tokens on the first call. Reading drains the list,
    /// as Apple's service did.
    package func takeFeedback() -> [FeedbackTuple] {
        self.state.withLock { state in
            let taken = state.feedback
            state.feedback = []
            state.feedbackTokens = []
            state.statistics.feedbackReported += taken.count
            return taken
        }
    }

    /// Listens on `host:port` (0: ephemeral) over TLS with the simulator's certificate, asking for a client
    /// certificate signed by one of `clientCertificateTrustRoots` (the binary gateway's and the feedback service's
    /// way); each accepted connection gets the handler `makeHandler` returns, after TLS.
    static func listen(
        certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey,
        clientCertificateTrustRoots: [NIOSSLCertificate], host: String, port: Int,
        eventLoopGroup: any EventLoopGroup, makeHandler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> any Channel {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .noHostnameVerification
        tls.trustRoots = .certificates(clientCertificateTrustRoots)
        let sslContext = try NIOSSLContext(configuration: tls)
        return try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(makeHandler())
                }
            }
            .bind(host: host, port: port).get()
    }

    /// Starts a gateway on `host:port` (0: ephemeral) with the server's TLS material; clients must present a
    /// certificate signed by one of `clientCertificateTrustRoots`.
    package static func start(
        behaviour: BinaryGatewayBehaviour,
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientCertificateTrustRoots: [NIOSSLCertificate],
        host: String = "127.0.0.1",
        port: Int = 0,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> BinaryGateway {
        let gateway = BinaryGateway(behaviour: behaviour)
        let listener = try await Self.listen(
            certificateChain: certificateChain, privateKey: privateKey,
            clientCertificateTrustRoots: clientCertificateTrustRoots, host: host, port: port,
            eventLoopGroup: eventLoopGroup
        ) {
            gateway.state.withLock { $0.statistics.connections += 1 }
            return GatewayHandler(gateway: gateway)
        }
        gateway.listener.withLock { $0 = listener }
        return gateway
    }

    /// The bound port.
    package var port: Int { self.listener.withLock { $0?.localAddress?.port } ?? 0 }

    /// The counts so far.
    package var statistics: Statistics { self.state.withLock { $0.statistics } }

    /// Stops listening (open connections end with their clients).
    package func close() async {
        guard let listener = self.listener.withLock({ $0 }) else { return }
        try? await listener.close()
    }

    /// What to do after reading one notification.
    fileprivate enum Answer {
        case accept
        case packet(BinaryErrorResponse)
        case drop
    }

    fileprivate func decide(_ result: BinaryFrameDecoder.Result, lastAccepted: UInt32?) -> Answer {
        let notification: DecodedBinaryNotification
        switch result {
        case .failure(let problem):
            return self.packet(BinaryErrorResponse(status: problem.status, identifier: problem.identifier))
        case .success(let decoded):
            notification = decoded
        }
        let token = BinaryFrame.hex(notification.token)
        return self.state.withLock { state -> Answer in
            state.read += 1
            if let drop = self.behaviour.dropAfter, !state.dropDone, state.read > drop {
                state.dropDone = true
                state.statistics.drops += 1
                return .drop
            }
            if let shutdown = self.behaviour.shutdownAfter, !state.shutdownDone, state.read > shutdown {
                state.shutdownDone = true
                let response = BinaryErrorResponse(status: .shutdown, identifier: lastAccepted ?? 0)
                state.statistics.recordErrorPacket(response)
                return .packet(response)
            }
            var status: BinaryStatus?
            if state.read == self.behaviour.processingErrorAt {
                status = .processingError
            } else if self.behaviour.unregisteredTokens.contains(token) {
                status = .invalidToken
                state.addFeedback(FeedbackTuple(timeEpochSeconds: Self.now(), token: notification.token))
            }
            guard let status else {
                state.statistics.recordProcessed(token)
                return .accept
            }
            let response = BinaryErrorResponse(status: status, identifier: notification.identifier)
            state.statistics.recordErrorPacket(response)
            return .packet(response)
        }
    }

    private func packet(_ response: BinaryErrorResponse) -> Answer {
        self.state.withLock { $0.statistics.recordErrorPacket(response) }
        return .packet(response)
    }

    fileprivate var payloadLimitBytes: Int { self.behaviour.payloadLimitBytes }

    /// The current time in UNIX seconds, as a feedback tuple carries it.
    static func now() -> UInt32 {
        UInt32(clamping: Int64(Date().timeIntervalSince1970))
    }
}

/// One gateway connection: decodes, answers the first fault with a packet and closes.
private final class GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let gateway: BinaryGateway
    private var decoder: BinaryFrameDecoder
    private var lastAccepted: UInt32?
    private var closing = false

    init(gateway: BinaryGateway) {
        self.gateway = gateway
        self.decoder = BinaryFrameDecoder(payloadLimitBytes: gateway.payloadLimitBytes)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.closing else { return }
        let buffer = self.unwrapInboundIn(data)
        for result in self.decoder.read(buffer.readableBytesView) {
            switch self.gateway.decide(result, lastAccepted: self.lastAccepted) {
            case .accept:
                if case .success(let notification) = result { self.lastAccepted = notification.identifier }
            case .packet(let response):
                self.closing = true
                let bytes = context.channel.allocator.buffer(bytes: response.bytes)
                let channel = context.channel
                context.writeAndFlush(self.wrapOutboundOut(bytes)).whenComplete { _ in channel.close(promise: nil) }
                return
            case .drop:
                self.closing = true
                context.close(promise: nil)
                return
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
