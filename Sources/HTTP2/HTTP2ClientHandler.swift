// The channel handler behind HTTP2ClientConnection: owns the nghttp2 client session, the FIFO queue, stream
// bookkeeping, request timeouts and idle PINGs. Runs only on its channel's event loop.

import CNghttp2
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization

final class HTTP2ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case handshaking
        case waitingForSettings
        case ready
        /// GOAWAY received or close requested: open streams finish, nothing new starts.
        case draining
        case closed
    }

    /// How many times a stream refused with REFUSED_STREAM (before any GOAWAY) is retried on this connection.
    private static let maxRefusals = 3

    private let shared: ClientShared
    private var state = State.handshaking
    private var session: NGHTTP2Session?
    private var context: ChannelHandlerContext?
    private var queue = CircularBuffer<PendingRequest>()
    /// Queued requests marked ``HTTP2Request/expedited``: they open streams before any of ``queue``.
    private var expedited = CircularBuffer<PendingRequest>()
    private var active: [Int32: PendingRequest] = [:]
    /// The request whose response fields came last (``activeStream(_:)``).
    private var lastStream: PendingRequest?
    /// Requests in the order their deadlines fall (all share one timeout, so arrival order).
    private var deadlines = CircularBuffer<PendingRequest>()
    /// Responses complete in the current read, handed over by ``deliverAnswered()``.
    private var answered: [(PendingRequest, HTTP2Response)] = []
    private var timeoutTimer: Scheduled<Void>?
    private var pingTimer: Scheduled<Void>?
    private var pingTimeoutTimer: Scheduled<Void>?
    private var lastReadAt = NIODeadline.now()
    private var closeReason: HTTP2CloseReason?
    private var goAway: HTTP2GoAway?
    private var remoteMaxConcurrentStreams = 100
    private var inCallbacks = false
    /// The error code of a GOAWAY nghttp2 sent on its own, after a protocol error by the server.
    private var sentGoAwayError: HTTP2ErrorCode?

    init(shared: ClientShared) {
        self.shared = shared
        self.keptResponseHeaders = shared.configuration.keptResponseHeaders?.map { Array($0.utf8) }
    }

    /// The names of ``HTTP2ClientConfiguration/keptResponseHeaders``, as bytes to compare with. A constant: a lazy
    /// property's getter returned a copy, a retain and a release per response header.
    private let keptResponseHeaders: [[UInt8]]?

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.shared.handler.value = self
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A channel that never became active (TCP connect failed) gets no channelInactive.
        self.finalize(self.closeReason ?? .connectionLost("the connection closed"))
        self.context = nil
        self.shared.handler.value = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            guard negotiated == "h2" else {
                self.shared.ready.fail(
                    HTTP2Error(
                        .connectFailed, "the server did not negotiate HTTP/2 (ALPN h2); got \(negotiated ?? "none")")
                )
                context.close(promise: nil)
                return
            }
            let session = NGHTTP2Session(server: false, userData: Unmanaged.passUnretained(self).toOpaque()) {
                installClientCallbacks($0)
            }
            self.session = session
            session.submitSettings(
                maxConcurrentStreams: nil, maxHeaderListBytes: self.shared.configuration.maxResponseHeaderListBytes)
            self.state = .waitingForSettings
            self.flush()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session = self.session else { return }
        self.lastReadAt = .now()
        self.inCallbacks = true
        let failure = session.receive(self.unwrapInboundIn(data))
        self.inCallbacks = false
        if let failure {
            self.shared.logger.warning("HTTP/2 protocol error from the server", error: failure)
            self.flush()
            self.closeNow(.connectionLost("HTTP/2 protocol error: \(failure)"))
            return
        }
        self.submitQueued()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.trimDeadlines()
        self.flush()
        self.deliverAnswered()
        self.closeIfFinished()
        context.fireChannelReadComplete()
    }

    /// Hands the responses that completed during this read to their senders, after ``flush()`` wrote the
    /// requests their streams made room for, in one hand-over to the answer loop (``PendingRequest/finish(_:)``):
    /// the senders' callbacks (the bridge publishes each outcome there) run on another thread while this one reads
    /// the next answers and writes the next requests. Run on this thread, they took half of its time, and the server
    /// waited for it (docs/benchmarks.md, "Answers off the event loop").
    private func deliverAnswered() {
        guard !self.answered.isEmpty else { return }
        var answers: [Answer] = []
        answers.reserveCapacity(self.answered.count)
        for (pending, response) in self.answered {
            if let completion = pending.take() { answers.append(Answer(completion: completion, response: response)) }
        }
        self.answered.removeAll(keepingCapacity: true)
        self.shared.deliver(answers)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.shared.logger.debug("HTTP/2 connection error", error: error)
        if self.state == .handshaking || self.state == .waitingForSettings {
            self.shared.ready.fail(HTTP2Error(.connectFailed, "TLS or HTTP/2 setup failed", cause: error))
        }
        self.closeNow(.connectionLost("\(error)"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finalize(self.closeReason ?? .connectionLost("the server closed the connection"))
        context.fireChannelInactive()
    }

    // MARK: Requests

    /// Moves every request from the inbox into the FIFO queue and starts what the stream limit allows.
    func drainInbox() {
        let requests = self.shared.inbox.withLock { inbox in
            inbox.drainScheduled = false
            let requests = inbox.requests
            inbox.requests.removeAll(keepingCapacity: true)
            return requests
        }
        let deadline = NIODeadline.now() + TimeAmount(clamping: self.shared.configuration.requestTimeout)
        for pending in requests where pending.phase == .inbox {
            if pending.cancelRequested {
                pending.finish(.failure(HTTP2Error(.cancelled, "the sending task was cancelled")))
                continue
            }
            pending.phase = .queued
            pending.deadline = deadline
            if pending.request.expedited {
                self.expedited.append(pending)
            } else {
                self.queue.append(pending)
            }
            self.deadlines.append(pending)
        }
        self.scheduleTimeoutTimer()
        self.submitQueued()
        self.flush()
    }

    private var effectiveLimit: Int {
        min(self.remoteMaxConcurrentStreams, self.shared.configuration.maxConcurrentStreams)
    }

    /// Opens streams for queued requests while below the stream limit.
    private func submitQueued() {
        if self.state == .ready, let session = self.session {
            let limit = self.effectiveLimit
            while self.active.count < limit, let pending = self.expedited.popFirst() ?? self.queue.popFirst() {
                guard pending.phase == .queued else { continue }
                self.submit(pending, session: session)
            }
        }
        self.publishCounts()
    }

    private func submit(_ pending: PendingRequest, session: NGHTTP2Session) {
        // Read in place (`request` is a constant of the class): a local copy of the request, or iterating its
        // headers, retained and released every string of it once more per request.
        session.headerBlock.reset()
        session.headerBlock.add(":method", pending.request.method)
        session.headerBlock.add(":scheme", "https")
        session.headerBlock.add(":authority", pending.request.authority ?? self.shared.defaultAuthority)
        session.headerBlock.add(":path", pending.request.path, indexing: pending.request.pathIndexing)
        for index in pending.request.headers.indices {
            session.headerBlock.add(
                pending.request.headers[index].name, pending.request.headers[index].value,
                indexing: pending.request.headers[index].indexing)
        }
        pending.bodyOffset = 0
        var provider = NGHTTP2Session.dataProvider(for: pending)
        let streamID = session.headerBlock.withNameValues(appending: pending.request.fields) { nameValues, count in
            if provider == nil {
                return nghttp2_submit_request(session.pointer, nil, nameValues, count, nil, nil)
            }
            return nghttp2_submit_request(session.pointer, nil, nameValues, count, &provider!, nil)
        }
        guard streamID > 0 else {
            if streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue {
                // Stream ids are exhausted: this connection is done; a new one takes over.
                pending.finish(.failure(HTTP2Error(.notProcessed, "the connection ran out of stream ids")))
                self.beginDraining(HTTP2Error(.notProcessed, "the connection ran out of stream ids"))
            } else {
                pending.finish(
                    .failure(
                        HTTP2Error(
                            .invalidRequest, "nghttp2 refused the request: \(NGHTTP2Session.errorText(streamID))"))
                )
            }
            return
        }
        pending.phase = .active
        pending.streamID = streamID
        self.active[streamID] = pending
        self.shared.streamsOpened.add(1, ordering: .relaxed)
    }

    func cancel(_ pending: PendingRequest) {
        switch pending.phase {
        case .inbox:
            pending.cancelRequested = true
        case .queued:
            pending.finish(.failure(HTTP2Error(.cancelled, "the sending task was cancelled")))
        case .active:
            self.session?.reset(streamID: pending.streamID, errorCode: .cancel)
            pending.finish(.failure(HTTP2Error(.cancelled, "the sending task was cancelled")))
            self.flush()
        case .done:
            break
        }
    }

    private func publishCounts() {
        self.shared.activeStreams.store(self.active.count, ordering: .relaxed)
        self.shared.queuedRequests.store(self.expedited.count + self.queue.count, ordering: .relaxed)
        self.shared.maxConcurrentStreams.store(self.effectiveLimit, ordering: .relaxed)
    }

    // MARK: Timeouts and PING

    private func trimDeadlines() {
        while let head = self.deadlines.first, head.phase == .done {
            self.deadlines.removeFirst()
        }
    }

    private func scheduleTimeoutTimer() {
        guard self.timeoutTimer == nil, let head = self.deadlines.first, let context = self.context else { return }
        self.timeoutTimer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: head.deadline) {
            self.timeoutTimer = nil
            self.expireRequests()
        }
    }

    private func expireRequests() {
        let now = NIODeadline.now()
        let timeout = self.shared.configuration.requestTimeout
        while let head = self.deadlines.first {
            if head.phase == .done {
                self.deadlines.removeFirst()
                continue
            }
            if head.deadline > now { break }
            self.deadlines.removeFirst()
            if head.phase == .active {
                self.session?.reset(streamID: head.streamID, errorCode: .cancel)
            }
            head.finish(.failure(HTTP2Error(.timeout, "no response within \(timeout)")))
        }
        self.scheduleTimeoutTimer()
        self.submitQueued()
        self.flush()
    }

    private func scheduleIdlePing(after delay: TimeAmount) {
        guard let context = self.context, self.state != .closed else { return }
        self.pingTimer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: delay) {
            self.idlePingCheck()
        }
    }

    private func idlePingCheck() {
        guard let session = self.session, self.state != .closed else { return }
        let interval = TimeAmount(clamping: self.shared.configuration.idlePingInterval)
        let idle = NIODeadline.now() - self.lastReadAt
        guard idle >= interval else {
            self.scheduleIdlePing(after: interval - idle)
            return
        }
        _ = nghttp2_submit_ping(session.pointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        self.flush()
        self.shared.logger.trace("idle: HTTP/2 PING sent")
        self.pingTimeoutTimer = self.context?.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(
            in: TimeAmount(clamping: self.shared.configuration.pingTimeout)
        ) {
            self.shared.logger.warning("HTTP/2 PING not acknowledged in time; closing the connection")
            self.closeNow(.pingTimeout)
        }
    }

    func pingAcknowledged() {
        self.shared.pingsAcknowledged.add(1, ordering: .relaxed)
        self.pingTimeoutTimer?.cancel()
        self.pingTimeoutTimer = nil
        self.scheduleIdlePing(after: TimeAmount(clamping: self.shared.configuration.idlePingInterval))
    }

    // MARK: nghttp2 events

    func settingsReceived() {
        guard let session = self.session else { return }
        let remote = nghttp2_session_get_remote_settings(session.pointer, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
        self.remoteMaxConcurrentStreams = Int(min(remote, UInt32(Int32.max)))
        if self.state == .waitingForSettings {
            self.state = .ready
            self.shared.ready.succeed()
            self.scheduleIdlePing(after: TimeAmount(clamping: self.shared.configuration.idlePingInterval))
        }
        self.publishCounts()
    }

    func goAwayReceived(_ goAway: HTTP2GoAway) {
        let first = self.goAway == nil
        self.goAway = goAway
        self.shared.logger.log(
            level: first ? .warning : .debug,
            "HTTP/2 GOAWAY received",
            metadata: [
                "http2.goaway.error": "\(goAway.errorCode)",
                "http2.goaway.last_stream_id": "\(goAway.lastStreamID)",
                "http2.goaway.debug": "\(goAway.debugText)",
            ]
        )
        if self.closeReason == nil { self.closeReason = .goAway(goAway) }
        self.beginDraining(
            HTTP2Error(.notProcessed, "the server sent GOAWAY; the request was not processed", goAway: goAway),
            goAway: goAway
        )
    }

    /// Records one response header field; `false` when the response broke the header caps, which fails the
    /// request and tells nghttp2 to reset the stream and skip the rest of the block (it keeps decoding HPACK to
    /// stay in sync, but nothing more is kept).
    func responseHeader(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        guard let pending = self.activeStream(streamID) else { return true }
        // The two limits, not the whole configuration: copying it retained each of its references per field.
        let (maxFields, maxBytes) = (
            self.shared.configuration.maxResponseHeaderFields, self.shared.configuration.maxResponseHeaderListBytes
        )
        pending.responseHeaderFields += 1
        pending.responseHeaderListBytes += name.count + value.count + 32
        guard pending.responseHeaderFields <= maxFields else {
            pending.finish(
                .failure(
                    HTTP2Error(
                        .malformedResponse,
                        "the response has more than \(maxFields) header fields")))
            return false
        }
        guard pending.responseHeaderListBytes <= maxBytes else {
            pending.finish(
                .failure(
                    HTTP2Error(
                        .malformedResponse,
                        "the response headers exceed \(maxBytes) bytes")))
            return false
        }
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(":status".utf8) { pending.status = Self.status(value) }
            return true
        }
        if let kept = self.keptResponseHeaders, !kept.contains(where: { $0.elementsEqual(name) }) {
            return true
        }
        pending.responseHeaders.append(
            HTTP2Header(headerString(name.baseAddress, name.count), headerString(value.baseAddress, value.count)))
        return true
    }

    /// A `:status` value: three digits, else -2 (which fails the response as malformed).
    private static func status(_ value: UnsafeBufferPointer<UInt8>) -> Int {
        guard value.count == 3 else { return -2 }
        var status = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return -2 }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return status
    }

    /// The request on open stream `streamID`, `nil` once it is done. nghttp2 reports a response's header fields
    /// and data one call each, all for the same stream in a row, so the last stream found is kept and the
    /// dictionary is searched once per response instead of once per field. (Stream IDs are never reused on a
    /// connection, and a request sent again gets a new one, so the kept entry can only match its own stream.)
    private func activeStream(_ streamID: Int32) -> PendingRequest? {
        if let last = self.lastStream, last.streamID == streamID {
            return last.phase == .active ? last : nil
        }
        guard let pending = self.active[streamID] else { return nil }
        self.lastStream = pending
        return pending.phase == .active ? pending : nil
    }

    func responseData(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let pending = self.activeStream(streamID) else { return }
        let limit = self.shared.configuration.maxResponseBodyBytes
        guard pending.responseBody.count + bytes.count <= limit else {
            self.session?.reset(streamID: streamID, errorCode: .cancel)
            pending.finish(.failure(HTTP2Error(.malformedResponse, "the response body exceeds \(limit) bytes")))
            return
        }
        pending.responseBody.append(contentsOf: bytes)
    }

    func streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode) {
        guard let pending = self.active.removeValue(forKey: streamID) else { return }
        guard pending.phase == .active else { return }
        if errorCode == .noError {
            if pending.status >= 100 {
                self.shared.responsesReceived.add(1, ordering: .relaxed)
                self.answered.append(
                    (
                        pending,
                        HTTP2Response(
                            status: pending.status, headers: pending.responseHeaders, body: pending.responseBody)
                    ))
            } else {
                pending.finish(.failure(HTTP2Error(.malformedResponse, "the response has no valid :status")))
            }
        } else if errorCode == .refusedStream {
            if let goAway = self.goAway {
                pending.finish(
                    .failure(HTTP2Error(.notProcessed, "the server sent GOAWAY before processing it", goAway: goAway))
                )
            } else if pending.refusals < Self.maxRefusals && self.state == .ready {
                // Legal race with a lowered SETTINGS_MAX_CONCURRENT_STREAMS: retry first in line.
                pending.refusals += 1
                pending.phase = .queued
                pending.status = -1
                pending.responseHeaders.removeAll()
                pending.responseHeaderFields = 0
                pending.responseHeaderListBytes = 0
                pending.responseBody.removeAll()
                if pending.request.expedited {
                    self.expedited.prepend(pending)
                } else {
                    self.queue.prepend(pending)
                }
            } else {
                pending.finish(.failure(HTTP2Error(.notProcessed, "the server refused the stream (REFUSED_STREAM)")))
            }
        } else {
            pending.finish(
                .failure(
                    HTTP2Error(
                        .malformedResponse,
                        "the stream was reset with \(errorCode) (malformed response or server reset)"
                    )
                )
            )
        }
    }

    func requestNotSent(streamID: Int32, reason: Int32) {
        guard let pending = self.active.removeValue(forKey: streamID) else { return }
        pending.finish(
            .failure(
                HTTP2Error(
                    .notProcessed, "the request was not sent: \(NGHTTP2Session.errorText(reason))", goAway: self.goAway
                )
            )
        )
    }

    // MARK: Closing

    /// Stops accepting requests and fails queued ones with `refusal`; open streams finish.
    private func beginDraining(_ refusal: HTTP2Error, goAway: HTTP2GoAway? = nil) {
        if self.state != .closed { self.state = .draining }
        let waiting = self.shared.stopAccepting(refusal, goAway: goAway)
        for pending in waiting where pending.phase == .inbox {
            pending.finish(.failure(refusal))
        }
        while let pending = self.expedited.popFirst() ?? self.queue.popFirst() {
            pending.finish(.failure(refusal))
        }
        self.publishCounts()
    }

    func closeGracefully() {
        if self.closeReason == nil { self.closeReason = .closedLocally }
        self.beginDraining(HTTP2Error(.notProcessed, "the connection is closing; the request was not sent"))
        if self.session == nil {
            self.closeNow(.closedLocally)
            return
        }
        self.closeIfFinished()
    }

    private func closeIfFinished() {
        guard self.state == .draining, let session = self.session, !self.inCallbacks else { return }
        if self.active.isEmpty || session.isFinished {
            if self.goAway == nil {
                session.submitGoAway(
                    lastStreamID: 0, errorCode: .noError, debugData: []
                )
            }
            self.flush()
            self.closeNow(self.closeReason ?? .closedLocally)
        }
    }

    private func closeNow(_ reason: HTTP2CloseReason) {
        if self.closeReason == nil { self.closeReason = reason }
        guard self.state != .closed, let context = self.context else { return }
        context.close(promise: nil)
    }

    /// Fails everything still waiting and reports the close (once).
    private func finalize(_ reason: HTTP2CloseReason) {
        guard self.state != .closed else { return }
        // Complete responses still count, however the connection ends.
        self.deliverAnswered()
        let wasEstablished = self.state == .ready || self.state == .draining
        self.state = .closed
        self.timeoutTimer?.cancel()
        self.pingTimer?.cancel()
        self.pingTimeoutTimer?.cancel()
        let lost = HTTP2Error(.connectionLost, "the connection closed before the response arrived (\(reason))")
        self.beginDraining(HTTP2Error(.notProcessed, "the connection closed before the request was sent"))
        let open = self.active
        self.active.removeAll()
        for pending in open.values {
            pending.finish(.failure(lost))
        }
        self.publishCounts()
        self.shared.ready.fail(HTTP2Error(.connectFailed, "the connection closed during setup (\(reason))"))
        self.shared.closed.succeed(reason)
        if wasEstablished, case .connectionLost(let text) = reason {
            self.shared.logger.info("HTTP/2 connection lost", metadata: ["http2.reason": "\(text)"])
        }
    }

    private func flush() {
        guard let session = self.session, let context = self.context, !self.inCallbacks else { return }
        var failure: String?
        if let output = session.pendingOutput(allocator: context.channel.allocator, error: &failure) {
            context.writeAndFlush(self.wrapOutboundOut(output), promise: nil)
            // Sending RST_STREAM closes streams, so the counts may have changed.
            self.publishCounts()
        }
        if let failure {
            self.closeNow(.connectionLost("nghttp2 failed: \(failure)"))
            return
        }
        // nghttp2 ends the session by itself when the server breaks the protocol in some ways (a header field over
        // 64 KiB, too many CONTINUATION frames): it queues GOAWAY, ignores all further input and reports no error.
        // Without this check such a connection would sit open, accepting requests that can only time out.
        if self.state == .ready || self.state == .waitingForSettings, session.isFinished {
            let sent = self.sentGoAwayError.map { " with GOAWAY \($0)" } ?? ""
            self.shared.logger.warning(
                "HTTP/2 session ended after a protocol error from the server",
                metadata: ["http2.goaway.sent": "\(self.sentGoAwayError.map(\.description) ?? "none")"])
            self.closeNow(.connectionLost("the client ended the session\(sent) after a protocol error by the server"))
        }
    }

    /// nghttp2 sent GOAWAY by itself (a protocol error by the server): remembered for the close reason.
    func goAwaySent(errorCode: HTTP2ErrorCode) {
        if errorCode != .noError, self.sentGoAwayError == nil {
            self.sentGoAwayError = errorCode
        }
    }
}
