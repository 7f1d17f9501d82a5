// A client connection: one TCP + TLS connection speaking HTTP/2 through one nghttp2 session.

import EgressProxy
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/2 client connection over TLS (ALPN `h2`), one-shot: it is opened by
/// ``connect(configuration:eventLoopGroup:logger:)`` and never reconnects. Requests beyond the stream limit wait in
/// a FIFO queue; every request has a timeout. After GOAWAY, a lost connection or ``close()``, it accepts no new
/// requests; a pool replaces it.
package final class HTTP2ClientConnection: Sendable {
    private let shared: ClientShared

    private init(shared: ClientShared) {
        self.shared = shared
    }

    /// Opens a connection: a fresh DNS lookup, TCP (through the proxy's `CONNECT` tunnel when
    /// ``HTTP2ClientConfiguration/proxy`` is set), TLS 1.2+ with ALPN `h2`, the HTTP/2 preface, and the server's first
    /// SETTINGS, all within the connect timeout. Throws ``HTTP2Error`` with code `connectFailed` (its cause an
    /// `EgressProxyError` when the proxy refused or failed).
    package static func connect(
        configuration: HTTP2ClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.http2")
    ) async throws -> HTTP2ClientConnection {
        var logger = logger
        logger[metadataKey: "http2.peer"] = "\(configuration.host):\(configuration.port)"
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: try Self.tlsConfiguration(configuration.tls))
        } catch {
            throw HTTP2Error(.connectFailed, "invalid TLS settings (trust roots or client certificate)", cause: error)
        }
        let eventLoop = eventLoopGroup.next()
        let shared = ClientShared(eventLoop: eventLoop, configuration: configuration, logger: logger)
        let serverName =
            configuration.tls.serverName ?? (Self.isIPAddress(configuration.host) ? nil : configuration.host)
        // One deadline for everything: TCP, the proxy's answer, TLS and the server's first SETTINGS.
        let deadline = NIODeadline.now() + TimeAmount(clamping: configuration.connectTimeout)
        let channel: any Channel
        do {
            channel = try await EgressConnect.connect(
                host: configuration.host, port: configuration.port, proxy: configuration.proxy, eventLoop: eventLoop,
                timeout: configuration.connectTimeout
            ) { channel in
                let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverName)
                try channel.pipeline.syncOperations.addHandler(tls)
                try channel.pipeline.syncOperations.addHandler(HTTP2ClientHandler(shared: shared))
            }.get()
        } catch {
            let failure =
                if let error = error as? EgressProxyError {
                    // Its text says everything (which proxy, which target, what it answered); no cause repeats it.
                    HTTP2Error(.connectFailed, "cannot connect \(error)")
                } else {
                    HTTP2Error(
                        .connectFailed, "cannot connect to \(configuration.host):\(configuration.port)", cause: error)
                }
            shared.ready.fail(failure)
            shared.closed.succeed(.connectionLost("\(failure)"))
            throw failure
        }
        // The timer only fails the setup's promise. Once the handler has succeeded it (on the event loop, as the
        // server's SETTINGS arrive) that failure is a no-op, whatever order the loop runs the timer and the callbacks
        // queued from this task in: on a busy host this task resumes after the deadline, and the timer then runs at
        // once. The channel is closed only when the failure took effect, never for a connection that was up in time.
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            shared.ready.fail(HTTP2Error(.connectFailed, "no TLS handshake and SETTINGS within the connect timeout"))
        }
        shared.ready.futureResult.whenComplete { result in
            timeout.cancel()
            if case .failure = result { channel.close(promise: nil) }
        }
        do {
            try await shared.ready.futureResult.get()
        } catch {
            if let error = error as? HTTP2Error { throw error }
            throw HTTP2Error(.connectFailed, "TLS or HTTP/2 setup failed", cause: error)
        }
        return HTTP2ClientConnection(shared: shared)
    }

    /// A request and what to call with its response, for ``send(contentsOf:)``. (A struct rather than a tuple:
    /// an array of tuples stores its closures in the generic representation, one thunk per element.)
    package struct Submission: Sendable {
        /// The request.
        package var request: HTTP2Request
        /// Called once with the response or the error.
        package var completion: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void

        /// Creates a submission.
        package init(
            request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void
        ) {
            self.request = request
            self.completion = completion
        }
    }

    /// Sends the requests and calls each one's completion once with the response or the ``HTTP2Error``
    /// (`notProcessed`, safe to re-send elsewhere; `connectionLost`, `timeout`, `malformedResponse`, `closed`,
    /// `cancelled`, `invalidRequest`): on the connection's answer loop (one of the `h2-answers` threads, never the
    /// event loop: see ``PendingRequest/finish(_:)``), or on the calling thread when the connection refuses a request at
    /// once or the request is invalid. One hand-over to the event loop (one wake-up) for all of them; no task waits
    /// meanwhile, and the request's timeout ends it.
    ///
    /// The one way a request goes out: the path of a caller with thousands of requests in flight (the bridge),
    /// where a task and a continuation per request cost more than the HTTP/2 work itself. ``send(_:)`` is written
    /// on top of it.
    package func send(contentsOf submissions: [Submission]) {
        var accepted: [PendingRequest] = []
        accepted.reserveCapacity(submissions.count)
        // Read in place: a copy of each submission would retain and release its request and closure once more.
        for index in submissions.indices {
            if let problem = Self.validate(submissions[index].request) {
                submissions[index].completion(.failure(HTTP2Error(.invalidRequest, problem)))
                continue
            }
            let pending = PendingRequest(request: submissions[index].request, answers: self.shared.answers)
            pending.completion = submissions[index].completion
            accepted.append(pending)
        }
        self.submit(accepted)
    }

    /// Sends `request` and returns the complete response; throws the ``HTTP2Error`` of ``send(contentsOf:)``. A
    /// task cancelled meanwhile cancels the request on its stream (`cancelled`).
    package func send(_ request: HTTP2Request) async throws -> HTTP2Response {
        if let problem = Self.validate(request) {
            throw HTTP2Error(.invalidRequest, problem)
        }
        let pending = PendingRequest(request: request, answers: self.shared.answers)
        let shared = self.shared
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                pending.completion = { continuation.resume(with: $0.mapError { $0 }) }
                self.submit(CollectionOfOne(pending))
            }
        } onCancel: {
            shared.eventLoop.execute {
                shared.handler.value?.cancel(pending)
            }
        }
    }

    /// Hands requests whose completion is set to the event loop; fails them all, on the calling thread, when the
    /// connection refuses them.
    private func submit(_ requests: some Collection<PendingRequest>) {
        guard !requests.isEmpty, let error = self.shared.enqueue(contentsOf: requests) else { return }
        for pending in requests {
            pending.take()?(.failure(error))
        }
    }

    /// A snapshot of the connection's state (stream counts, limit, whether it accepts requests).
    package var state: HTTP2ConnectionState {
        let (accepting, goAway) = self.shared.inbox.withLock { ($0.accepting, $0.goAway) }
        return HTTP2ConnectionState(
            activeStreams: self.shared.activeStreams.load(ordering: .relaxed),
            queuedRequests: self.shared.queuedRequests.load(ordering: .relaxed),
            maxConcurrentStreams: self.shared.maxConcurrentStreams.load(ordering: .relaxed),
            isAcceptingRequests: accepting,
            goAway: goAway,
            pingsAcknowledged: self.shared.pingsAcknowledged.load(ordering: .relaxed),
            streamsOpened: self.shared.streamsOpened.load(ordering: .relaxed),
            responsesReceived: self.shared.responsesReceived.load(ordering: .relaxed)
        )
    }

    /// Whether the connection accepts new requests (false after GOAWAY, loss or close).
    package var isAcceptingRequests: Bool { self.shared.inbox.withLock { $0.accepting } }

    /// Returns once the connection is closed, with the reason.
    package func waitUntilClosed() async -> HTTP2CloseReason {
        (try? await self.shared.closed.futureResult.get()) ?? .connectionLost("unknown")
    }

    /// Stops accepting requests, fails queued ones with `notProcessed`, lets open streams finish (each bounded by
    /// its timeout), sends GOAWAY and closes. Returns when closed.
    package func close() async {
        let shared = self.shared
        shared.eventLoop.execute {
            shared.handler.value?.closeGracefully()
        }
        _ = await self.waitUntilClosed()
    }

    private static func validate(_ request: HTTP2Request) -> String? {
        if request.method.isEmpty { return "the request method is empty" }
        if request.path.utf8.first != UInt8(ascii: "/") {
            return "the request path must start with '/' (got \(request.path.prefix(16)))"
        }
        // By index and over UTF-8: this runs for every request, and iterating copied each header (two
        // references retained and released) and `hasPrefix` compared Unicode strings.
        for index in request.headers.indices {
            let name = request.headers[index].name
            if name.utf8.isEmpty || name.utf8.first == UInt8(ascii: ":") {
                return "header name '\(name)' is empty or a pseudo-header; use the request's fields"
            }
            if name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
                return "header name '\(name)' must be lower-case in HTTP/2"
            }
        }
        return nil
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }

    private static func tlsConfiguration(_ tls: HTTP2ClientTLS) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = ["h2"]
        configuration.certificateVerification = .fullVerification
        if let file = tls.additionalTrustRootsPEMFile {
            if tls.trustSystemRoots {
                configuration.trustRoots = .default
                configuration.additionalTrustRoots = [.file(file)]
            } else {
                configuration.trustRoots = .file(file)
            }
        } else {
            configuration.trustRoots = tls.trustSystemRoots ? .default : .certificates([])
        }
        if !tls.clientCertificateChain.isEmpty {
            configuration.certificateChain = tls.clientCertificateChain.map { .certificate($0) }
            configuration.privateKey = tls.clientPrivateKey.map { .privateKey($0) }
        }
        return configuration
    }
}

extension TimeAmount {
    /// A NIO time amount from a `Duration`, clamped to `0...Int64.max` nanoseconds (about 292 years).
    ///
    /// Durations come from configuration and command lines; multiplying their seconds by 10^9 unchecked trapped
    /// on values such as `--timeout 20000000000`. A clamped amount is still a correct deadline: `NIODeadline`
    /// saturates at `distantFuture`.
    init(clamping duration: Duration) {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else {
            self = .zero
            return
        }
        let (secondsNanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, sumOverflow) = secondsNanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000)
        self = .nanoseconds(overflow || sumOverflow ? .max : max(total, 0))
    }
}

/// One request on its way: created by `send`, then owned by the event loop. Also the DATA source of its body.
///
/// `@unchecked Sendable`: the sender writes `completion` before handing the object to the event
/// loop through the inbox lock (which orders those writes); after that only the event loop reads or writes its
/// fields.
final class PendingRequest: OutgoingBody, @unchecked Sendable {
    enum Phase {
        /// In the inbox, not yet seen by the event loop.
        case inbox
        /// In the handler's FIFO queue.
        case queued
        /// On an open stream.
        case active
        /// Answered or failed; the completion was called.
        case done
    }

    let request: HTTP2Request
    /// Called once when the request ends.
    var completion: (@Sendable (Result<HTTP2Response, HTTP2Error>) -> Void)?
    /// Where ``finish(_:)`` calls it: the connection's answer loop.
    let answers: any EventLoop
    var phase = Phase.inbox
    var cancelRequested = false
    var streamID: Int32 = 0
    var refusals = 0
    var deadline = NIODeadline.distantFuture
    var status = -1
    var responseHeaders: [HTTP2Header] = []
    /// Header fields received so far, pseudo-headers included, and their size as HTTP/2 counts it.
    var responseHeaderFields = 0
    var responseHeaderListBytes = 0
    var responseBody: [UInt8] = []

    init(request: HTTP2Request, answers: any EventLoop) {
        self.request = request
        self.answers = answers
        super.init()
        self.body = request.body
    }

    /// Ends the request with `result`: its completion runs on the connection's answer loop, not on the event loop,
    /// which goes back to reading and writing while the caller's work on the answer (the bridge publishes its
    /// outcome there) runs on another core. Ignored once the request is done.
    func finish(_ result: Result<HTTP2Response, HTTP2Error>) {
        guard let completion = self.take() else { return }
        self.answers.execute { completion(result) }
    }

    /// Marks the request done and returns its completion for the caller to call; `nil` when it was done already.
    func take() -> (@Sendable (Result<HTTP2Response, HTTP2Error>) -> Void)? {
        guard self.phase != .done else { return nil }
        self.phase = .done
        defer { self.completion = nil }
        return self.completion
    }
}

/// A response and the completion it goes to, handed to the answer loop with the others of one read.
struct Answer: Sendable {
    let completion: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void
    let response: HTTP2Response
}

/// State shared between callers of `send` (any thread) and the connection's event loop.
final class ClientShared: Sendable {
    struct Inbox {
        var requests: [PendingRequest] = []
        var drainScheduled = false
        var accepting = true
        var goAway: HTTP2GoAway?
        var refusal: HTTP2Error?
    }

    let eventLoop: any EventLoop
    let configuration: HTTP2ClientConfiguration
    /// `:authority` for requests that name none: `host`, with `:port` unless it is 443.
    let defaultAuthority: String
    let logger: Logger
    let handler: NIOLoopBoundBox<HTTP2ClientHandler?>
    let inbox = Mutex(Inbox())
    /// Where the requests' completions run, one at a time: each read's answers together, in the order they arrived, and
    /// each failure as the event loop decides it (``PendingRequest/finish(_:)``, ``AnswerLoops``).
    let answers = AnswerLoops.next()
    let ready: EventLoopPromise<Void>
    let closed: EventLoopPromise<HTTP2CloseReason>
    let activeStreams = Atomic<Int>(0)
    let queuedRequests = Atomic<Int>(0)
    let maxConcurrentStreams = Atomic<Int>(0)
    let pingsAcknowledged = Atomic<Int>(0)
    let streamsOpened = Atomic<Int>(0)
    let responsesReceived = Atomic<Int>(0)

    init(eventLoop: any EventLoop, configuration: HTTP2ClientConfiguration, logger: Logger) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.defaultAuthority =
            configuration.port == 443 ? configuration.host : "\(configuration.host):\(configuration.port)"
        self.logger = logger
        self.handler = NIOLoopBoundBox.makeEmptyBox(valueType: HTTP2ClientHandler.self, eventLoop: eventLoop)
        self.ready = eventLoop.makePromise()
        self.closed = eventLoop.makePromise()
    }

    /// Calls the completions of answers the event loop ended, on the answer loop, in one hand-over.
    func deliver(_ answers: [Answer]) {
        guard !answers.isEmpty else { return }
        self.answers.execute {
            for answer in answers { answer.completion(.success(answer.response)) }
        }
    }

    /// Hands requests to the event loop together (all or none); returns the error when it accepts none. One wake-up
    /// of the event loop serves every request enqueued before it runs.
    func enqueue(contentsOf requests: some Collection<PendingRequest>) -> HTTP2Error? {
        let (refusal, wake): (HTTP2Error?, Bool) = self.inbox.withLock { inbox in
            guard inbox.accepting else {
                return (inbox.refusal ?? HTTP2Error(.closed, "the connection accepts no new requests"), false)
            }
            inbox.requests.append(contentsOf: requests)
            if inbox.drainScheduled { return (nil, false) }
            inbox.drainScheduled = true
            return (nil, true)
        }
        if wake {
            self.eventLoop.execute {
                self.handler.value?.drainInbox()
            }
        }
        return refusal
    }

    /// Stops accepting requests; returns those still in the inbox.
    func stopAccepting(_ refusal: HTTP2Error, goAway: HTTP2GoAway? = nil) -> [PendingRequest] {
        self.inbox.withLock { inbox in
            inbox.accepting = false
            if inbox.refusal == nil { inbox.refusal = refusal }
            if let goAway { inbox.goAway = goAway }
            let requests = inbox.requests
            inbox.requests = []
            return requests
        }
    }
}
