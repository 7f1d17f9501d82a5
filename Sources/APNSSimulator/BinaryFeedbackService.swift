import BinaryProvider
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import Waiting

/// The simulator's feedback service for the binary protocol: TLS with a client certificate signed by the given
/// CA, like the gateway. Once a connection's handshake completes it writes one `time | token length | token`
/// tuple per entry of ``BinaryGateway/takeFeedback()`` (the tokens the gateway refused with status 8 since the
/// last read, at the time it refused them) and closes the connection. Reading drains the list, as Apple's
/// service did: each entry is reported to one reader once.
package final class BinaryFeedbackService: Sendable {
    /// What the service did, for tests and the summary printed at shutdown.
    package struct Statistics: Sendable, Hashable {
        /// Connections whose TLS handshake completed.
        package var connections = 0
        /// Tuples written.
        package var tuplesSent = 0
        /// Connections by the fingerprint of the client certificate they presented
        /// (``SimulatorRequest/fingerprint(of:)``).
        package var connectionsByClientCertificate: [String: Int] = [:]
    }

    private let gateway: BinaryGateway
    private let counts = AsyncCondition(Statistics())
    private let listener = Mutex<(any Channel)?>(nil)

    private init(gateway: BinaryGateway) {
        self.gateway = gateway
    }

    /// Starts a feedback service on `host:port` (0: ephemeral) that reports `gateway`'s entries; clients must
    /// present a certificate signed by one of `clientCertificateTrustRoots`.
    package static func start(
        gateway: BinaryGateway,
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientCertificateTrustRoots: [NIOSSLCertificate],
        host: String = "127.0.0.1",
        port: Int = 0,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> BinaryFeedbackService {
        let service = BinaryFeedbackService(gateway: gateway)
        let listener = try await BinaryGateway.listen(
            certificateChain: certificateChain, privateKey: privateKey,
            clientCertificateTrustRoots: clientCertificateTrustRoots, host: host, port: port,
            eventLoopGroup: eventLoopGroup
        ) { FeedbackWriter(service: service) }
        service.listener.withLock { $0 = listener }
        return service
    }

    /// The bound port.
    package var port: Int { self.listener.withLock { $0?.localAddress?.port } ?? 0 }

    /// The counts so far.
    package var statistics: Statistics { self.counts.read { $0 } }

    /// Waits until `condition` holds for the counts, checked at once and after every change; `false` when `timeout`
    /// passed first.
    package func waitForStatistics(
        timeout: Duration, until condition: @escaping @Sendable (Statistics) -> Bool
    ) async -> Bool {
        await self.counts.wait(deadline: .now + timeout) { condition($0) ? () : nil }.value != nil
    }

    /// Stops listening.
    package func close() async {
        guard let listener = self.listener.withLock({ $0 }) else { return }
        try? await listener.close()
    }

    /// The bytes for one reader: the gateway's entries, drained.
    fileprivate func takeBytes(clientCertificate: String?) -> [UInt8] {
        let tuples = self.gateway.takeFeedback()
        self.counts.withLock {
            $0.connections += 1
            $0.tuplesSent += tuples.count
            if let clientCertificate { $0.connectionsByClientCertificate[clientCertificate, default: 0] += 1 }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(tuples.count * 38)
        for tuple in tuples { bytes += tuple.bytes }
        return bytes
    }
}

/// Writes the entries once the handshake completed, then closes; whatever the client sends is ignored.
private final class FeedbackWriter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let service: BinaryFeedbackService

    init(service: BinaryFeedbackService) {
        self.service = service
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            let certificate = (try? context.channel.pipeline.syncOperations.nioSSL_peerCertificate())?
                .flatMap(SimulatorRequest.fingerprint(of:))
            let bytes = context.channel.allocator.buffer(bytes: self.service.takeBytes(clientCertificate: certificate))
            let channel = context.channel
            context.writeAndFlush(self.wrapOutboundOut(bytes)).whenComplete { _ in channel.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
