import APNSCore
import BinaryProvider
import DequeModule
import EgressProxy
import HTTP2
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
    /// The HTTP proxy whose `CONNECT` tunnel connections go through; `nil` connects directly.
    package var proxy: EgressProxy?
    /// The client certificate: the binary protocol has no token authentication.
    package var credentials: CertificateCredentials
    /// A PEM file of extra CA certificates to trust besides the system's (a test or in-house gateway's own CA),
    /// like ``APNSClientConfiguration/additionalTrustRootsPEMFile``.
    package var additionalTrustRootsPEMFile: String?
    /// The format written.
    package var format: BinaryFormat = .framed
    /// The payload limit checked before writing: `nil` means the format's (Apple's 2048 bytes for framed, 256
    /// for enhanced and simple).
    package var payloadLimit: Int?
    /// The payload limit in force.
    package var payloadLimitBytes: Int { self.payloadLimit ?? self.format.defaultPayloadLimitBytes }
    /// How long a written notification waits for an error packet before it counts as delivered.
    package var quietWindow: Duration = .seconds(1)
    /// The most notifications written and not yet confirmed on the connection.
    package var maxUnconfirmed = 10_000
    /// How many closes without an error packet one notification may be in doubt through before it fails
    /// with `ConnectionLost`.
    package var maxResendsWithoutError = 3
    /// The longest a connection attempt may take: TCP, the proxy's answer to `CONNECT` and the TLS handshake
    /// together (a gateway, proxy or middlebox that accepts TCP and never answers fails the attempt when it passes).
    package var connectTimeout: Duration = .seconds(10)
    /// The longest bytes handed to the connection may wait to be written into the socket: a gateway that stops
    /// reading fills the socket, and after this the connection is closed and what it left is in doubt.
    package var writeTimeout: Duration = .seconds(10)
    /// The most bytes handed to the connection and not yet written into the socket; beyond them (or while NIO
    /// says the channel is not writable) notifications wait in the queue, encoded only when written.
    package var maxUnwrittenBytes = 256 * 1024
    /// The first delay before reconnecting after a connection that failed or confirmed nothing; it doubles per
    /// such connection, with jitter, up to ``reconnectMaximumDelay``, and starts over once a connection served.
    package var reconnectInitialDelay: Duration = .milliseconds(100)
    /// The longest delay between reconnects.
    package var reconnectMaximumDelay: Duration = .seconds(30)

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
/// The socket is not trusted:
/// - a connection attempt (TCP and TLS together) ends within ``BinaryClientConfiguration/connectTimeout``;
/// - a notification's quiet window starts when its bytes were written into the socket, not when they were handed
///   to the connection; the writer stops while the channel is not writable or
///   ``BinaryClientConfiguration/maxUnwrittenBytes`` wait to be written, so a gateway that stops reading holds
///   the queue instead of the process's memory, and after ``BinaryClientConfiguration/writeTimeout`` without
///   progress the connection is closed (what it left is in doubt);
/// - after a connection that failed, or closed before it served (confirmed a notification, or answered one
///   with a refusal), the next one waits an exponential backoff with jitter; the backoff starts over only once a
///   connection served.
///
/// All state lives on one event loop; ``send(_:completion:)`` may be called from any thread and `completion`
/// runs on the event loop. A gateway that cannot be reached, or closes ``closesBeforeUnreachable`` connections
/// in a row before serving, fails what waits with ``APNSFailure/unreachable(_:)`` (systemic: the bridge halts and
/// probes, as with HTTP/2).
package final class BinaryClient: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on `eventLoop` (each entry point hops there).

    /// Connections in a row that close before serving after which what waits fails as unreachable (a failed
    /// connection attempt fails it at once): one such close can be a gateway's restart, two are a pattern.
    package static let closesBeforeUnreachable = 2

    private struct Item: Sendable {
        var notification: Notification
        var completion: @Sendable (APNSResult) -> Void
    }

    /// The open connection and what it did.
    private struct Connection {
        let channel: any Channel
        /// It confirmed a notification, or the gateway refused one on it: it served, so the backoff starts over.
        var served = false
        /// Something was handed to it.
        var wrote = false
    }

    /// Bytes handed to the connection in one burst whose write has not completed.
    private struct PendingWrite {
        /// The last notification of the burst.
        var identifier: UInt32
        var bytes: Int
        var handedAt: ContinuousClock.Instant
    }

    private let configuration: BinaryClientConfiguration
    private let eventLoop: any EventLoop
    private let sslContext: NIOSSLContext
    private var waiting: Deque<(item: Item, resendsWithoutError: Int)> = []
    private var window: BinaryWriteWindow<Item>
    private var connection: Connection?
    private var connecting = false
    /// The connection being opened, until its TLS handshake completes.
    private var handshaking: (any Channel)?
    private var handshakeError: String?
    private var handshakeTimer: Scheduled<Void>?
    private var closed = false
    private var confirmationTimer: Scheduled<Void>?
    private var pendingWrites: Deque<PendingWrite> = []
    private var unwrittenBytes = 0
    private var stallTimer: Scheduled<Void>?
    /// Failed connection attempts and connections closed before serving, since the last that served.
    private var consecutiveFailures = 0
    private var closesBeforeServing = 0
    private var reconnectNotBefore: ContinuousClock.Instant?
    private var reconnectTimer: Scheduled<Void>?
    private let connected = Atomic<Int>(0)

    /// Creates a client; it connects when the first notification arrives. Throws a ``CredentialError`` naming the
    /// file when the extra CA file does not load.
    package init(
        configuration: BinaryClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoopGroup.next()
        // A close waits at most a second for the gateway's close_notify (NIOSSL's default is 5 s): a gateway
        // that stopped reading never sends it, and a shutdown should not wait for it.
        self.sslContext = try NIOSSLContext.binaryProtocolClient(
            credentials: configuration.credentials,
            additionalTrustRootsPEMFile: configuration.additionalTrustRootsPEMFile, shutdownTimeout: .seconds(1))
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

    /// Sends `notification` and waits for its result (``APNSCore/APNSResult/awaiting(_:)``).
    package func send(_ notification: Notification) async -> APNSResult {
        await APNSResult.awaiting { self.send(notification, completion: $0) }
    }

    /// Open connections: 1 while connected, else 0.
    package var openConnections: Int { self.connected.load(ordering: .relaxed) }

    /// What the connection holds in the process, read at one moment on its event loop (`nil` without a connection):
    /// for tests of the write bounds.
    package struct Buffered: Sendable {
        /// Plaintext the client handed to TLS whose write has not completed: what
        /// ``BinaryClientConfiguration/maxUnwrittenBytes`` bounds.
        package var handed: Int
        /// The writes those bytes went out in; each is encrypted into at least one TLS record of its own.
        package var writes: Int
        /// NIO's count of bytes waiting for the socket (`bufferedWritableBytes`): ciphertext, so each TLS record's
        /// header and tag are counted on top of the part of `handed` not yet in the socket.
        package var socket: Int
    }

    package func bufferedBytes() async -> Buffered? {
        try? await self.eventLoop.submit { () -> Buffered? in
            guard let channel = self.connection?.channel,
                let socket = try? channel.syncOptions?.getOption(.bufferedWritableBytes)
            else { return nil }
            return Buffered(handed: self.unwrittenBytes, writes: self.pendingWrites.count, socket: socket)
        }.get()
    }

    /// Closes the connection after waiting (at most `timeout`) until everything written is confirmed and
    /// nothing waits; what still waits then fails with ``APNSFailure/connectionLost``, and what is still
    /// unconfirmed settles as in doubt when the connection closes (resent nowhere: it fails the same way). A
    /// connection still being opened is closed too.
    package func close(timeout: Duration = .seconds(5)) async {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let idle = try? await self.eventLoop.submit { self.window.count == 0 && self.waiting.isEmpty }.get()
            if idle ?? true { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let channels = try? await self.eventLoop.submit { () -> [any Channel] in
            self.closed = true
            self.reconnectTimer?.cancel()
            self.reconnectTimer = nil
            for (item, _) in self.waiting { item.completion(.failed(.connectionLost)) }
            self.waiting.removeAll()
            return [self.connection?.channel, self.handshaking].compactMap { $0 }
        }.get()
        for channel in channels ?? [] { try? await channel.close() }
    }

    // MARK: On the event loop

    private func pump() {
        guard !self.waiting.isEmpty, !self.closed else { return }
        guard let channel = self.connection?.channel else {
            self.connect()
            return
        }
        var bytes: [UInt8] = []
        while !self.window.isFull, channel.isWritable,
            self.unwrittenBytes + bytes.count < self.configuration.maxUnwrittenBytes,
            let (item, resends) = self.waiting.popFirst()
        {
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
            _ = self.window.write(item, resendsWithoutError: resends)
        }
        if !bytes.isEmpty {
            // One write for the burst, and its completion says when its bytes reached the socket.
            let identifier = self.window.nextIdentifier &- 1
            self.connection?.wrote = true
            self.unwrittenBytes += bytes.count
            self.pendingWrites.append(PendingWrite(identifier: identifier, bytes: bytes.count, handedAt: .now))
            let promise = channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { self.written(on: channel) }
            channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: promise)
            self.scheduleStallCheck()
        }
        self.scheduleConfirmation()
    }

    /// The oldest burst on `channel` reached the socket: its quiet window starts, and there may be room for more.
    private func written(on channel: any Channel) {
        guard self.connection?.channel === channel, let burst = self.pendingWrites.popFirst() else { return }
        self.unwrittenBytes -= burst.bytes
        self.window.written(through: burst.identifier, at: .now)
        self.scheduleConfirmation()
        self.pump()
    }

    /// Closes the connection once its oldest unwritten burst waited ``BinaryClientConfiguration/writeTimeout``.
    private func scheduleStallCheck() {
        guard self.stallTimer == nil, let oldest = self.pendingWrites.first else { return }
        let delay = max(.zero, oldest.handedAt + self.configuration.writeTimeout - ContinuousClock.now)
        self.stallTimer = self.eventLoop.scheduleTask(in: TimeAmount(delay)) {
            self.stallTimer = nil
            guard let oldest = self.pendingWrites.first, self.connection != nil else { return }
            if oldest.handedAt + self.configuration.writeTimeout <= .now, let channel = self.connection?.channel {
                // Settled now: the TLS close that follows waits for the gateway's close_notify, which a gateway
                // that reads nothing never sends.
                self.connectionClosed(channel, stalled: true)
                channel.close(promise: nil)
            } else {
                self.scheduleStallCheck()
            }
        }
    }

    private func connect() {
        guard !self.connecting, !self.closed else { return }
        let now = ContinuousClock.now
        if let notBefore = self.reconnectNotBefore, notBefore > now {
            guard self.reconnectTimer == nil else { return }
            self.reconnectTimer = self.eventLoop.scheduleTask(in: TimeAmount(notBefore - now)) {
                self.reconnectTimer = nil
                self.pump()
            }
            return
        }
        self.connecting = true
        let sslContext = self.sslContext
        let host = self.configuration.host
        let port = self.configuration.port
        let serverName = Self.isIPAddress(host) ? nil : host
        EgressConnect.connect(
            host: host, port: port, proxy: self.configuration.proxy, eventLoop: self.eventLoop,
            timeout: self.configuration.connectTimeout
        ) { channel in
            let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverName)
            try channel.pipeline.syncOperations.addHandler(tls)
            try channel.pipeline.syncOperations.addHandler(ErrorPacketReader(client: self))
        }.whenComplete { result in
            switch result {
            case .success(let channel):
                guard !self.closed else {
                    self.connecting = false
                    channel.close(promise: nil)
                    return
                }
                guard channel.isActive else {
                    // Closed before this ran: its close was not recognised as this attempt's, so it ends here.
                    self.connecting = false
                    self.attemptFailed(
                        "TLS with the binary gateway \(host):\(port) failed: the connection closed at once",
                        failWaiting: true)
                    return
                }
                // Nothing is written before the TLS handshake completed (handshakeCompleted(_:)): a notification
                // written into a handshake that then fails must not count as delivered by its quiet window.
                self.handshaking = channel
                let remaining = max(.zero, now + self.configuration.connectTimeout - ContinuousClock.now)
                self.handshakeTimer = self.eventLoop.scheduleTask(in: TimeAmount(remaining)) {
                    guard self.handshaking === channel else { return }
                    self.handshakeError =
                        "no TLS handshake within \(self.configuration.connectTimeout) of connecting (a gateway, proxy "
                        + "or middlebox that accepts TCP and does not answer TLS)"
                    channel.close(promise: nil)
                }
            case .failure(let error as EgressProxyError):
                self.connecting = false
                self.attemptFailed("cannot connect to the binary gateway \(error)", failWaiting: true)
            case .failure(let error):
                self.connecting = false
                self.attemptFailed("cannot connect to the binary gateway \(host):\(port): \(error)", failWaiting: true)
            }
        }
    }

    /// The TLS handshake of the connection being opened completed: it is the connection now.
    fileprivate func handshakeCompleted(_ channel: any Channel) {
        guard self.handshaking === channel else { return }
        self.handshakeTimer?.cancel()
        self.handshakeTimer = nil
        self.handshaking = nil
        self.connecting = false
        self.connection = Connection(channel: channel)
        self.connected.store(1, ordering: .relaxed)
        self.pump()
    }

    /// An error on `channel` (a TLS failure, most often), kept to say why a handshake failed.
    fileprivate func connectionFailed(_ channel: any Channel, _ error: any Error) {
        if self.handshaking === channel { self.handshakeError = "\(error)" }
    }

    /// The connection's writability changed: the writer may go on.
    fileprivate func writabilityChanged(_ channel: any Channel) {
        if self.connection?.channel === channel { self.pump() }
    }

    /// A connection attempt failed, or a connection closed before serving: the next attempt backs off, and what
    /// waits fails with ``APNSFailure/unreachable(_:)`` when `failWaiting`.
    private func attemptFailed(_ reason: String, failWaiting: Bool) {
        self.consecutiveFailures += 1
        let delay = ConnectionPool.backoff(
            failures: self.consecutiveFailures, initial: self.configuration.reconnectInitialDelay,
            maximum: self.configuration.reconnectMaximumDelay)
        self.reconnectNotBefore = .now + delay
        if failWaiting {
            let waiting = self.waiting
            self.waiting.removeAll()
            for (item, _) in waiting { item.completion(.failed(.unreachable(reason))) }
        } else {
            self.pump()
        }
    }

    /// The connection served: the backoff starts over.
    private func served() {
        guard self.connection?.served == false else { return }
        self.connection?.served = true
        self.consecutiveFailures = 0
        self.closesBeforeServing = 0
        self.reconnectNotBefore = nil
    }

    private func scheduleConfirmation() {
        guard self.confirmationTimer == nil, let next = self.window.nextConfirmation else { return }
        let delay = max(.zero, next - ContinuousClock.now)
        self.confirmationTimer = self.eventLoop.scheduleTask(in: TimeAmount(delay)) {
            self.confirmationTimer = nil
            let delivered = self.window.confirmDue(now: .now)
            if !delivered.isEmpty { self.served() }
            for item in delivered {
                item.completion(.answered(APNSResponse(status: 200, apnsID: item.notification.apnsID)))
            }
            self.pump()
            self.scheduleConfirmation()
        }
    }

    /// An error packet arrived: settle the window; the gateway closes the connection next.
    fileprivate func errorReceived(_ response: BinaryErrorResponse) {
        let settlement = self.window.errorReceived(response)
        if !settlement.delivered.isEmpty { self.served() }
        if let (_, verdict) = settlement.failed, case .refused = verdict { self.served() }
        self.settle(settlement)
    }

    /// The connection ended (`stalled`: closed by the write timeout); what it left unconfirmed (nothing, after an
    /// error packet) is in doubt.
    fileprivate func connectionClosed(_ channel: any Channel, stalled: Bool = false) {
        if self.handshaking === channel {
            // Closed before the handshake completed: nothing was written; the gateway cannot be used.
            self.handshakeTimer?.cancel()
            self.handshakeTimer = nil
            self.handshaking = nil
            self.connecting = false
            let why = self.handshakeError ?? "the connection closed during the TLS handshake"
            self.handshakeError = nil
            guard !self.closed else { return }
            self.attemptFailed(
                "TLS with the binary gateway \(self.configuration.host):\(self.configuration.port) failed: \(why)",
                failWaiting: true)
            return
        }
        guard let connection = self.connection, connection.channel === channel else { return }
        self.connection = nil
        self.connected.store(0, ordering: .relaxed)
        self.confirmationTimer?.cancel()
        self.confirmationTimer = nil
        self.stallTimer?.cancel()
        self.stallTimer = nil
        self.pendingWrites.removeAll()
        self.unwrittenBytes = 0
        let settlement = self.window.closedWithoutError()
        self.window = Self.newWindow(self.configuration)
        guard !self.closed else {
            self.settle(settlement)
            let waiting = self.waiting
            self.waiting.removeAll()
            for (item, _) in waiting { item.completion(.failed(.connectionLost)) }
            return
        }
        guard !connection.served, connection.wrote || !self.waiting.isEmpty else {
            self.settle(settlement)
            self.pump()
            return
        }
        // Closed before serving: a failed attempt. Once it is a pattern the line halts, and what it left in doubt
        // too often halts with it (unreachable, sent again after the halt) instead of ending `ConnectionLost`:
        // a gateway that ends every connection is down, not refusing these notifications.
        self.closesBeforeServing += 1
        let endpoint = "\(self.configuration.host):\(self.configuration.port)"
        let why =
            stalled
            ? "the binary gateway \(endpoint) read nothing for \(self.configuration.writeTimeout)"
            : "the binary gateway \(endpoint) closed the connection before confirming anything"
        let reason = "\(why) (\(self.closesBeforeServing) connections in a row)"
        let halting = self.closesBeforeServing >= Self.closesBeforeUnreachable
        self.settle(settlement, lost: halting ? .unreachable(reason) : .connectionLost)
        self.attemptFailed(reason, failWaiting: halting)
    }

    private func settle(
        _ settlement: BinaryWriteWindow<Item>.Settlement, lost failure: APNSFailure = .connectionLost
    ) {
        for item in settlement.delivered {
            item.completion(.answered(APNSResponse(status: 200, apnsID: item.notification.apnsID)))
        }
        if let (item, verdict) = settlement.failed {
            item.completion(Self.result(of: verdict, for: item.notification))
        }
        for item in settlement.lost {
            item.completion(.failed(failure))
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

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.client.writabilityChanged(context.channel)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.client.connectionFailed(context.channel, error)
        context.close(promise: nil)
    }
}
