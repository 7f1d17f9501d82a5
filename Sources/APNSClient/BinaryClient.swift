import APNSCore
import BinaryProvider
import DequeModule
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// How a ``BinaryClient`` reaches its gateway and confirms what it wrote.
package struct BinaryClientConfiguration: Sendable {
    /// The gateway's host (`gateway.push.apple.com` historically).
    package var host: String
    /// The gateway's port (2195 historically).
    package var port: Int
    /// The client certificate: the binary protocol has no token authentication.
    package var credentials: CertificateCredentials
    /// A PEM file of extra CA certificates to trust besides the system's (a test or in-house gateway's own CA),
    /// like ``APNSClientConfiguration/additionalTrustRootsPEMFile``.
    package var additionalTrustRootsPEMFile: String?
    /// The format written.
    package var format: BinaryFormat = .framed
    /// The payload limit checked before writing.
    package var payloadLimitBytes = BinaryFrame.framedPayloadLimitBytes
    /// How long a written notification waits for an error packet before it counts as delivered.
    package var quietWindow: Duration = .seconds(1)
    /// The most notifications written and not yet confirmed on the connection.
    package var maxUnconfirmed = 10_000
    /// How many closes without an error packet one notification may be in doubt through before it fails
    /// with `ConnectionLost`.
    package var maxResendsWithoutError = 3
    /// The longest a connection attempt may take.
    package var connectTimeout: Duration = .seconds(10)

    /// Creates a configuration with the defaults above.
    package init(host: String, port: Int, credentials: CertificateCredentials) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }
}

/// A sender on Apple's legacy binary provider protocol: one TLS connection with a client certificate, the
/// write window of ``BinaryWriteWindow`` (confirmation after a quiet window, resend after an error packet or a
/// close), and results in the same ``APNSResult`` terms as the HTTP/2 client, so the bridge treats both alike.
///
/// All state lives on one event loop; ``send(_:completion:)`` may be called from any thread and `completion`
/// runs on the event loop. A gateway that cannot be reached fails what waits with
/// ``APNSFailure/unreachable(_:)`` (systemic: the bridge halts and probes, as with HTTP/2).
package final class BinaryClient: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on `eventLoop` (each entry point hops there).

    private struct Item: Sendable {
        var notification: Notification
        var completion: @Sendable (APNSResult) -> Void
    }

    private let configuration: BinaryClientConfiguration
    private let eventLoop: any EventLoop
    private let sslContext: NIOSSLContext
    private var waiting: Deque<(item: Item, resendsWithoutError: Int)> = []
    private var window: BinaryWriteWindow<Item>
    private var channel: (any Channel)?
    private var connecting = false
    /// The connection being opened, until its TLS handshake completes.
    private var handshaking: (any Channel)?
    private var handshakeError: (any Error)?
    private var closed = false
    private var confirmationTimer: Scheduled<Void>?
    private let connected = Atomic<Int>(0)

    /// Creates a client; it connects when the first notification arrives. Throws a ``CredentialError`` naming the
    /// file when the extra CA file does not load.
    package init(
        configuration: BinaryClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoopGroup.next()
        self.sslContext = try NIOSSLContext.binaryProtocolClient(
            credentials: configuration.credentials,
            additionalTrustRootsPEMFile: configuration.additionalTrustRootsPEMFile)
        self.window = Self.newWindow(configuration)
    }

    private static func newWindow(_ configuration: BinaryClientConfiguration) -> BinaryWriteWindow<Item> {
        BinaryWriteWindow(
            capacity: max(1, configuration.maxUnconfirmed), quietWindow: configuration.quietWindow,
            maxResendsWithoutError: configuration.maxResendsWithoutError)
    }

    /// Sends `notification`; `completion` gets its result once: delivered (status 200) once confirmed, a
    /// refusal with the gateway's reason, a local refusal without writing, or a failure.
    package func send(_ notification: Notification, completion: @escaping @Sendable (APNSResult) -> Void) {
        self.send(contentsOf: [APNSClient.Submission(notification: notification, completion: completion)])
    }

    /// ``send(_:completion:)`` for several notifications: one hand-over to the event loop for all of them.
    package func send(contentsOf submissions: [APNSClient.Submission]) {
        guard !submissions.isEmpty else { return }
        self.eventLoop.execute {
            guard !self.closed else {
                for submission in submissions {
                    submission.completion(.failed(.unreachable("the binary client is closed")))
                }
                return
            }
            for submission in submissions {
                self.waiting.append((Item(notification: submission.notification, completion: submission.completion), 0))
            }
            self.pump()
        }
    }

    /// Sends `notification` and waits for its result (``send(_:completion:)`` in a task).
    package func send(_ notification: Notification) async -> APNSResult {
        await withCheckedContinuation { continuation in
            self.send(notification) { continuation.resume(returning: $0) }
        }
    }

    /// Open connections: 1 while connected, else 0.
    package var openConnections: Int { self.connected.load(ordering: .relaxed) }

    /// Closes the connection after waiting (at most `timeout`) until everything written is confirmed and
    /// nothing waits; what still waits then fails with ``APNSFailure/connectionLost``, and what is still
    /// unconfirmed settles as in doubt when the connection closes (resent nowhere: it fails the same way).
    package func close(timeout: Duration = .seconds(5)) async {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let idle = try? await self.eventLoop.submit { self.window.count == 0 && self.waiting.isEmpty }.get()
            if idle ?? true { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let channel = try? await self.eventLoop.submit { () -> (any Channel)? in
            self.closed = true
            for (item, _) in self.waiting { item.completion(.failed(.connectionLost)) }
            self.waiting.removeAll()
            return self.channel
        }.get()
        if let channel { try? await channel.close() }
    }

    // MARK: On the event loop

    private func pump() {
        guard !self.waiting.isEmpty, !self.closed else { return }
        guard let channel = self.channel else {
            self.connect()
            return
        }
        var wrote = false
        let now = ContinuousClock.now
        while !self.window.isFull, let (item, resends) = self.waiting.popFirst() {
            var bytes: [UInt8] = []
            do {
                try BinaryFrame.append(
                    item.notification, identifier: self.window.nextIdentifier, format: self.configuration.format,
                    payloadLimitBytes: self.configuration.payloadLimitBytes, to: &bytes)
            } catch {
                // Refused locally, never written (like the HTTP/2 path's local validation).
                item.completion(
                    .answered(APNSResponse(status: 400, apnsID: item.notification.apnsID, reason: error.reason)))
                continue
            }
            _ = self.window.write(item, now: now, resendsWithoutError: resends)
            channel.write(channel.allocator.buffer(bytes: bytes), promise: nil)
            wrote = true
        }
        if wrote { channel.flush() }
        self.scheduleConfirmation()
    }

    private func connect() {
        guard !self.connecting else { return }
        self.connecting = true
        let sslContext = self.sslContext
        let host = self.configuration.host
        let serverName = Self.isIPAddress(host) ? nil : host
        let bootstrap = ClientBootstrap(group: self.eventLoop)
            .connectTimeout(.nanoseconds(self.configuration.connectTimeout.nanosecondsSaturated))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverName)
                    try channel.pipeline.syncOperations.addHandler(tls)
                    try channel.pipeline.syncOperations.addHandler(ErrorPacketReader(client: self))
                }
            }
        bootstrap.connect(host: host, port: self.configuration.port).whenComplete { result in
            switch result {
            case .success(let channel):
                // Nothing is written before the TLS handshake completed (handshakeCompleted(_:)): a notification
                // written into a handshake that then fails must not count as delivered by its quiet window.
                self.handshaking = channel
            case .failure(let error):
                self.connecting = false
                self.failWaiting("cannot connect to the binary gateway \(host):\(self.configuration.port): \(error)")
            }
        }
    }

    /// The TLS handshake of the connection being opened completed: it is the connection now.
    fileprivate func handshakeCompleted(_ channel: any Channel) {
        guard self.handshaking === channel else { return }
        self.handshaking = nil
        self.connecting = false
        self.channel = channel
        self.connected.store(1, ordering: .relaxed)
        self.pump()
    }

    /// An error on `channel` (a TLS failure, most often), kept to say why a handshake failed.
    fileprivate func connectionFailed(_ channel: any Channel, _ error: any Error) {
        if self.handshaking === channel { self.handshakeError = error }
    }

    /// Everything waiting fails with ``APNSFailure/unreachable(_:)`` (systemic: the bridge halts and probes).
    private func failWaiting(_ reason: String) {
        let waiting = self.waiting
        self.waiting.removeAll()
        for (item, _) in waiting { item.completion(.failed(.unreachable(reason))) }
    }

    private func scheduleConfirmation() {
        guard self.confirmationTimer == nil, let next = self.window.nextConfirmation else { return }
        let delay = max(.zero, next - ContinuousClock.now)
        self.confirmationTimer = self.eventLoop.scheduleTask(in: .nanoseconds(delay.nanosecondsSaturated)) {
            self.confirmationTimer = nil
            for item in self.window.confirmDue(now: .now) {
                item.completion(.answered(APNSResponse(status: 200, apnsID: item.notification.apnsID)))
            }
            self.pump()
            self.scheduleConfirmation()
        }
    }

    /// An error packet arrived: settle the window; the gateway closes the connection next.
    fileprivate func errorReceived(_ response: BinaryErrorResponse) {
        self.settle(self.window.errorReceived(response))
    }

    /// The connection ended; what it left unconfirmed (nothing, after an error packet) is in doubt.
    fileprivate func connectionClosed(_ channel: any Channel) {
        if self.handshaking === channel {
            // Closed before the handshake completed: nothing was written; the gateway cannot be used.
            self.handshaking = nil
            self.connecting = false
            let why = self.handshakeError.map { "\($0)" } ?? "the connection closed during the TLS handshake"
            self.handshakeError = nil
            self.failWaiting(
                "TLS with the binary gateway \(self.configuration.host):\(self.configuration.port) failed: \(why)")
            return
        }
        guard self.channel === channel else { return }
        self.channel = nil
        self.connected.store(0, ordering: .relaxed)
        self.confirmationTimer?.cancel()
        self.confirmationTimer = nil
        self.settle(self.window.closedWithoutError())
        self.window = Self.newWindow(self.configuration)
        if self.closed {
            let waiting = self.waiting
            self.waiting.removeAll()
            for (item, _) in waiting { item.completion(.failed(.connectionLost)) }
        }
        self.pump()
    }

    private func settle(_ settlement: BinaryWriteWindow<Item>.Settlement) {
        for item in settlement.delivered {
            item.completion(.answered(APNSResponse(status: 200, apnsID: item.notification.apnsID)))
        }
        if let (item, verdict) = settlement.failed {
            item.completion(Self.result(of: verdict, for: item.notification))
        }
        for item in settlement.lost {
            item.completion(.failed(.connectionLost))
        }
        // Discarded by the gateway, or in doubt: first in line again, in the order they were written.
        for resend in settlement.resend.reversed() {
            self.waiting.prepend((resend.item, resend.resendsWithoutError))
        }
    }

    private static func result(of verdict: BinaryVerdict, for notification: Notification) -> APNSResult {
        switch verdict {
        case .notFailed:
            .answered(APNSResponse(status: 200, apnsID: notification.apnsID))
        case .refused(let reason):
            .answered(APNSResponse(status: 400, apnsID: notification.apnsID, reason: reason))
        case .retry(let status):
            // A gateway fault: retryable, like APNs' 500 (an unknown 5xx reason is retryable).
            .answered(APNSResponse(status: 500, apnsID: notification.apnsID, reason: .unknown(status)))
        }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

/// Reads the 6-byte error packet (the only thing a gateway ever writes) and reports the connection's end.
private final class ErrorPacketReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let client: BinaryClient
    private var received: [UInt8] = []

    init(client: BinaryClient) {
        self.client = client
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.received.count < BinaryErrorResponse.byteCount else { return }
        self.received.append(contentsOf: self.unwrapInboundIn(data).readableBytesView)
        guard self.received.count >= BinaryErrorResponse.byteCount else { return }
        if let response = BinaryErrorResponse(self.received) {
            self.client.errorReceived(response)
        }
        // Anything else is not the protocol: the close that follows settles the window as in doubt.
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            self.client.handshakeCompleted(context.channel)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.client.connectionClosed(context.channel)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.client.connectionFailed(context.channel, error)
        context.close(promise: nil)
    }
}
