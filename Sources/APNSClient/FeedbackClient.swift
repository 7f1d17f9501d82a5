import BinaryProvider
import EgressProxy
import HTTP2
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// How a ``FeedbackClient`` reaches the feedback service, and how much one poll may take.
package struct FeedbackClientConfiguration: Sendable {
    /// The service's host (`feedback.push.apple.com` historically).
    package var host: String
    /// The service's port (2196 historically).
    package var port: Int
    /// The HTTP proxy whose `CONNECT` tunnel the poll's connection goes through; `nil` connects directly.
    package var proxy: EgressProxy?
    /// The client certificate, the same as the gateway's.
    package var credentials: CertificateCredentials
    /// A PEM file of extra CA certificates to trust besides the system's (a test or in-house service's own CA).
    package var additionalTrustRootsPEMFile: String?
    /// The longest one poll may take, connecting and reading included: a service that never closes cannot hold
    /// the poller.
    package var timeout: Duration = .seconds(30)
    /// The most tuples one poll reads; the connection is closed once they arrived.
    package var maxTuples = 100_000
    /// The most bytes one poll reads (a valid tuple is 38 bytes): what a poll holds stays bounded whatever the
    /// service sends.
    package var maxBytes = 100_000 * 38

    /// Creates a configuration with the defaults above.
    package init(host: String, port: Int, credentials: CertificateCredentials) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }
}

/// What one poll of the feedback service read.
package struct FeedbackPoll: Sendable, Hashable {
    /// How reading ended.
    package enum End: Sendable, Hashable {
        /// The service closed the connection after whole tuples: the protocol's normal end.
        case closed
        /// The service closed the connection in the middle of a tuple (that tuple is lost).
        case truncated
        /// ``FeedbackClientConfiguration/timeout`` passed before the service closed.
        case timedOut
        /// ``FeedbackClientConfiguration/maxTuples`` or ``FeedbackClientConfiguration/maxBytes`` was reached.
        case limitReached
        /// The service sent bytes that are not feedback tuples (a token length of 0 or over 100).
        case malformed(String)
        /// The connection failed after the service had sent something.
        case connectionError(String)
        /// The polling task was cancelled (the bridge is stopping).
        case cancelled
    }

    /// The complete tuples read, in order.
    package var tuples: [FeedbackTuple]
    /// The bytes read.
    package var bytesRead: Int
    /// How reading ended.
    package var end: End

    /// Creates a poll's result.
    package init(tuples: [FeedbackTuple], bytesRead: Int, end: End) {
        self.tuples = tuples
        self.bytesRead = bytesRead
        self.end = end
    }
}

/// The feedback service could not be polled: no connection, no TLS, or a failure before it sent anything.
package struct FeedbackFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, naming the service.
    package var reason: String

    /// Creates a failure.
    package init(reason: String) {
        self.reason = reason
    }

    package var description: String { self.reason }
}

/// A client of the legacy binary protocol's feedback service: each ``poll()`` opens a TLS connection with the
/// client certificate, reads `time | token length | token` tuples (``FeedbackReader``) until the service closes
/// the connection, and returns them. Bounded: a poll ends after ``FeedbackClientConfiguration/timeout``, and
/// after ``FeedbackClientConfiguration/maxTuples`` tuples or ``FeedbackClientConfiguration/maxBytes`` bytes,
/// whatever the service does.
package final class FeedbackClient: Sendable {
    private let configuration: FeedbackClientConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let sslContext: NIOSSLContext

    /// Creates a client; nothing connects until ``poll()``. Throws a ``CredentialError`` naming the file when the
    /// extra CA file does not load.
    package init(
        configuration: FeedbackClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        // A poll that ends early (a limit, the timeout) closes at once: waiting the default 5 s for the service's
        // close_notify would keep a flooding service's bytes coming, and the event loop decrypting them.
        self.sslContext = try NIOSSLContext.binaryProtocolClient(
            credentials: configuration.credentials,
            additionalTrustRootsPEMFile: configuration.additionalTrustRootsPEMFile, shutdownTimeout: .milliseconds(100))
    }

    /// The service as `host:port`, for messages.
    package var endpoint: String { "\(self.configuration.host):\(self.configuration.port)" }

    /// Connects, reads until the service closes (or a bound is reached), and returns what was read. Throws when
    /// no TLS connection could be made, or when the connection failed before the service sent anything (a
    /// refused client certificate shows this way with TLS 1.3). Cancelling the task closes the connection and
    /// returns what was read whole (``FeedbackPoll/End-swift.enum/cancelled``).
    package func poll() async throws(FeedbackFailure) -> FeedbackPoll {
        let eventLoop = self.eventLoopGroup.next()
        let state = PollState(
            eventLoop: eventLoop, endpoint: self.endpoint, maxTuples: self.configuration.maxTuples,
            maxBytes: self.configuration.maxBytes)
        state.start(timeout: self.configuration.timeout) { self.connect(eventLoop: eventLoop, state: state) }
        do {
            return try await withTaskCancellationHandler {
                try await state.promise.futureResult.get()
            } onCancel: {
                eventLoop.execute { state.finish(.cancelled) }
            }
        } catch let failure as FeedbackFailure {
            throw failure
        } catch {
            throw FeedbackFailure(reason: "feedback service \(self.endpoint): \(error)")
        }
    }

    private func connect(eventLoop: any EventLoop, state: PollState) -> EventLoopFuture<any Channel> {
        let sslContext = self.sslContext
        let host = self.configuration.host
        let serverName = (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
        return EgressConnect.connect(
            host: host, port: self.configuration.port, proxy: self.configuration.proxy, eventLoop: eventLoop,
            timeout: self.configuration.timeout
        ) { channel in
            try channel.pipeline.syncOperations.addHandler(
                try NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
            try channel.pipeline.syncOperations.addHandler(FeedbackReadHandler(state: state))
        }
    }
}

/// One poll's state. `@unchecked Sendable`: created off the loop, then every property is touched only on
/// `eventLoop` (the handler runs there, and every other entry point hops there).
private final class PollState: @unchecked Sendable {
    let eventLoop: any EventLoop
    let promise: EventLoopPromise<FeedbackPoll>
    private let endpoint: String
    private let maxTuples: Int
    private let maxBytes: Int
    private var reader = FeedbackReader()
    private var tuples: [FeedbackTuple] = []
    private var bytesRead = 0
    private var handshakeCompleted = false
    private var error: (any Error)?
    private var channel: (any Channel)?
    private var timer: Scheduled<Void>?
    private var finished = false

    init(eventLoop: any EventLoop, endpoint: String, maxTuples: Int, maxBytes: Int) {
        self.eventLoop = eventLoop
        self.promise = eventLoop.makePromise()
        self.endpoint = endpoint
        self.maxTuples = max(0, maxTuples)
        self.maxBytes = max(0, maxBytes)
    }

    /// Arms the timeout and connects (`connect`'s future completes on ``eventLoop``, so its callbacks run there).
    func start(timeout: Duration, connect: () -> EventLoopFuture<any Channel>) {
        let timer = self.eventLoop.scheduleTask(in: .nanoseconds(timeout.nanosecondsSaturated)) {
            self.finish(.timedOut)
        }
        self.eventLoop.execute {
            if self.finished { timer.cancel() } else { self.timer = timer }
        }
        connect().whenComplete { result in
            switch result {
            case .success(let channel):
                self.channel = channel
                if self.finished { channel.close(promise: nil) }
            case .failure(let error):
                self.error = error
                self.finish(.closed)
            }
        }
    }

    func handshakeDone() {
        self.handshakeCompleted = true
    }

    /// Bytes arrived: read the tuples, within the bounds.
    func read(_ buffer: ByteBuffer) {
        guard !self.finished else { return }
        let room = self.maxBytes - self.bytesRead
        let bytes = buffer.readableBytesView
        let taken = bytes.prefix(room)
        self.bytesRead += taken.count
        do {
            self.tuples += try self.reader.read(taken)
        } catch {
            self.tuples += error.tuplesBefore.prefix(max(0, self.maxTuples - self.tuples.count))
            self.finish(.malformed(error.detail))
            return
        }
        if self.tuples.count >= self.maxTuples {
            self.tuples.removeLast(self.tuples.count - self.maxTuples)
            self.finish(.limitReached)
        } else if bytes.count > taken.count || self.bytesRead >= self.maxBytes {
            self.finish(.limitReached)
        }
    }

    func failed(_ error: any Error) {
        // A service that closes without TLS close_notify has still sent whole tuples; the framing says what
        // arrived complete.
        if let ssl = error as? NIOSSLError, case .uncleanShutdown = ssl { return }
        self.error = self.error ?? error
    }

    func closed() {
        self.finish(self.reader.hasPartialTuple ? .truncated : .closed)
    }

    /// Ends the poll once: succeeds with what was read, or fails when nothing could be read.
    func finish(_ end: FeedbackPoll.End) {
        guard !self.finished else { return }
        self.finished = true
        self.timer?.cancel()
        self.channel?.close(promise: nil)
        var end = end
        if let error = self.error {
            guard self.handshakeCompleted, self.bytesRead > 0 else {
                let stage = self.handshakeCompleted ? "the connection failed" : "no TLS connection"
                self.promise.fail(FeedbackFailure(reason: "feedback service \(self.endpoint): \(stage): \(error)"))
                return
            }
            if end == .closed || end == .truncated { end = .connectionError("\(error)") }
        } else if !self.handshakeCompleted {
            let why =
                switch end {
                case .timedOut: "timed out before the TLS handshake completed"
                case .cancelled: "cancelled before the TLS handshake completed"
                default: "closed during the TLS handshake"
                }
            self.promise.fail(FeedbackFailure(reason: "feedback service \(self.endpoint): \(why)"))
            return
        }
        self.promise.succeed(FeedbackPoll(tuples: self.tuples, bytesRead: self.bytesRead, end: end))
    }
}

/// Hands the connection's events to its ``PollState``.
private final class FeedbackReadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let state: PollState

    init(state: PollState) {
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.state.read(self.unwrapInboundIn(data))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            self.state.handshakeDone()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.state.closed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.state.failed(error)
        context.close(promise: nil)
    }
}

extension Duration {
    /// Whole nanoseconds, saturated at `Int64.max` instead of trapping.
    var nanosecondsSaturated: Int64 {
        let (seconds, attoseconds) = self.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : whole &+ attoseconds / 1_000_000_000
    }
}

extension NIOSSLContext {
    /// The TLS context of a binary-protocol client (gateway or feedback service): full verification against the
    /// system's roots plus the extra CA file, and the client certificate. Throws a ``CredentialError`` naming the
    /// CA file when it does not load.
    static func binaryProtocolClient(
        credentials: CertificateCredentials, additionalTrustRootsPEMFile: String?, shutdownTimeout: TimeAmount? = nil
    ) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let shutdownTimeout { tls.shutdownTimeout = shutdownTimeout }
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        tls.trustRoots = .default
        if let file = additionalTrustRootsPEMFile {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(file))]
            } catch {
                throw CredentialError(code: .invalidCertificate, file: file, cause: "not a readable PEM certificate")
            }
        }
        tls.certificateChain = credentials.certificateChain.map { .certificate($0) }
        tls.privateKey = .privateKey(credentials.privateKey)
        return try NIOSSLContext(configuration: tls)
    }
}
