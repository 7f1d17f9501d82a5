// The channel handler of one server connection: owns the nghttp2 server session, collects each stream's request,
// hands it to the server's handler and sends the answers. Runs only on its channel's event loop.

import CNghttp2
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization

/// One stream's request as it arrives, then the DATA source of its response body.
final class ServerStream: OutgoingBody {
    let id: Int32
    var method = ""
    var path = ""
    var authority = ""
    var headers: [HTTP2Header] = []
    var requestBody: [UInt8] = []
    var responded = false
    /// Header fields so far and their size as HTTP/2 counts it (name + value + 32 each).
    var headerFields = 0
    var headerListBytes = 0
    /// The request broke a bound of the configuration; its stream is reset and it is never handled.
    var overLimits = false

    init(id: Int32) {
        self.id = id
        // Room for a typical request's fields at once, instead of regrowing the array field by field.
        self.headers.reserveCapacity(16)
    }
}

final class HTTP2ServerConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// After GOAWAY the client closes once its streams finish; if it does not within this time, the server does.
    private static let goAwayCloseGrace = TimeAmount.seconds(2)

    private let shared: ServerShared
    private let channel: any Channel
    private var box: ServerConnectionBox?
    private var context: ChannelHandlerContext?
    private var session: NGHTTP2Session?
    private var connectionID = 0
    private var peerCertificate: NIOSSLCertificate?
    private var streams: [Int32: ServerStream] = [:]
    private var streamCount = 0
    private var maxConcurrentStreams = 0
    var goAwayAfterStreams: Int?
    private var goAwaySent = false
    /// Streams above this id arrived after GOAWAY was decided; they are refused, never handled (the client
    /// re-sends them elsewhere, so handling them too would deliver them twice).
    private var goAwayLastStreamID: Int32?
    private var graceTimer: Scheduled<Void>?
    private var inCallbacks = false
    private var flushScheduled = false

    init(shared: ServerShared, channel: any Channel) {
        self.shared = shared
        self.channel = channel
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let box = ServerConnectionBox(channel: self.channel, handler: self)
        self.box = box
        let registration = self.shared.register(box)
        self.connectionID = registration.id
        self.maxConcurrentStreams = registration.maxConcurrentStreams
        self.goAwayAfterStreams = registration.goAwayAfterStreams
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            guard negotiated == "h2" else {
                self.shared.logger.info(
                    "client did not negotiate h2 via ALPN; closing", metadata: ["http2.alpn": "\(negotiated ?? "none")"]
                )
                context.close(promise: nil)
                return
            }
            self.peerCertificate = try? context.channel.pipeline.syncOperations.nioSSL_peerCertificate()
            let session = NGHTTP2Session(
                server: true,
                acknowledgesPings: self.shared.configuration.acknowledgesPings,
                userData: Unmanaged.passUnretained(self).toOpaque()
            ) {
                installServerCallbacks($0)
            }
            self.session = session
            session.submitSettings(
                maxConcurrentStreams: self.maxConcurrentStreams,
                maxHeaderListBytes: self.shared.configuration.maxRequestHeaderListBytes)
            self.flush()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session = self.session else { return }
        self.inCallbacks = true
        let failure = session.receive(self.unwrapInboundIn(data))
        self.inCallbacks = false
        if let failure {
            self.shared.logger.info("HTTP/2 protocol error from a client", error: failure)
            self.flush()
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flush()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.shared.logger.debug("HTTP/2 server connection error", error: error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.shared.unregister(self.connectionID)
        self.box = nil
        self.graceTimer?.cancel()
        self.streams.removeAll()
        self.session = nil
        context.fireChannelInactive()
    }

    // MARK: Control

    func sendGoAway(lastStreamID: Int32?, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {
        guard let session = self.session else { return }
        let last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session.pointer)
        session.submitGoAway(lastStreamID: last, errorCode: errorCode, debugData: debugData)
        self.goAwaySent = true
        self.goAwayLastStreamID = min(last, self.goAwayLastStreamID ?? .max)
        self.scheduleFlush()
    }

    func setMaxConcurrentStreams(_ streams: Int) {
        guard let session = self.session else {
            self.maxConcurrentStreams = streams
            return
        }
        self.maxConcurrentStreams = streams
        session.submitSettings(maxConcurrentStreams: streams)
        self.scheduleFlush()
    }

    func respond(streamID: Int32, response: HTTP2ServerResponse) {
        guard let session = self.session, let stream = self.streams[streamID], !stream.responded else { return }
        stream.responded = true
        session.headerBlock.reset()
        if let status = response.status {
            session.headerBlock.add(":status", String(status))
        }
        for header in response.headers {
            session.headerBlock.add(header.name, header.value, indexing: header.indexing)
        }
        stream.body = response.body
        stream.bodyOffset = 0
        var provider = NGHTTP2Session.dataProvider(for: stream)
        let result = session.headerBlock.withNameValues { nameValues, count in
            if provider == nil {
                return nghttp2_submit_response(session.pointer, streamID, nameValues, count, nil)
            }
            return nghttp2_submit_response(session.pointer, streamID, nameValues, count, &provider!)
        }
        if result != 0 {
            self.shared.logger.debug(
                "response not submitted", error: NGHTTP2Failure(code: result)
            )
        }
        self.scheduleFlush()
    }

    func reset(streamID: Int32, errorCode: HTTP2ErrorCode) {
        guard let session = self.session, let stream = self.streams[streamID], !stream.responded else { return }
        stream.responded = true
        session.reset(streamID: streamID, errorCode: errorCode)
        self.scheduleFlush()
    }

    // MARK: nghttp2 events

    fileprivate func beginStream(_ streamID: Int32) {
        if let last = self.goAwayLastStreamID, streamID > last {
            self.session?.reset(streamID: streamID, errorCode: .refusedStream)
            return
        }
        self.streamCount += 1
        self.streams[streamID] = ServerStream(id: streamID)
        let open = self.streams.count
        var seen = self.shared.maxConcurrentStreamsSeen.load(ordering: .relaxed)
        while open > seen {
            let (exchanged, original) = self.shared.maxConcurrentStreamsSeen.compareExchange(
                expected: seen, desired: open, ordering: .relaxed
            )
            if exchanged { break }
            seen = original
        }
        if let limit = self.goAwayAfterStreams, self.streamCount >= limit, !self.goAwaySent, let session = self.session
        {
            session.submitGoAway(
                lastStreamID: streamID, errorCode: .noError, debugData: self.shared.configuration.goAwayDebugData)
            self.goAwaySent = true
            self.goAwayLastStreamID = streamID
        }
    }

    /// Records one request header field; `false` when the request broke the header bounds (nghttp2 then resets
    /// the stream and skips the rest of its header block).
    fileprivate func header(
        streamID: Int32,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>,
        neverIndexed: Bool
    ) -> Bool {
        guard let stream = self.streams[streamID], !stream.overLimits else { return true }
        stream.headerFields += 1
        stream.headerListBytes += name.count + value.count + 32
        // The two bounds, not a copy of the whole configuration (retains and releases on every header field).
        guard stream.headerFields <= self.shared.configuration.maxRequestHeaderFields,
            stream.headerListBytes <= self.shared.configuration.maxRequestHeaderListBytes
        else {
            self.rejectOverLimits(stream)
            return false
        }
        let value = headerString(value.baseAddress, value.count)
        if name.first == UInt8(ascii: ":") {
            switch String(decoding: name, as: UTF8.self) {
            case ":method": stream.method = value
            case ":path": stream.path = value
            case ":authority": stream.authority = value
            default: break
            }
        } else {
            stream.headers.append(
                HTTP2Header(
                    String(decoding: name, as: UTF8.self), value, indexing: neverIndexed ? .never : .incremental))
        }
        return true
    }

    /// Appends request body bytes; a body past its bound resets the stream (RST_STREAM INTERNAL_ERROR, as nghttp2
    /// does for headers over their bound). nghttp2 treats any failure returned from its DATA callback as fatal to
    /// the whole connection, so the reset is submitted here instead.
    fileprivate func data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = self.streams[streamID], !stream.overLimits else { return }
        guard stream.requestBody.count + bytes.count <= self.shared.configuration.maxRequestBodyBytes else {
            self.rejectOverLimits(stream)
            self.session?.reset(streamID: streamID, errorCode: .internalError)
            return
        }
        stream.requestBody.append(contentsOf: bytes)
    }

    private func rejectOverLimits(_ stream: ServerStream) {
        stream.overLimits = true
        stream.headers = []
        stream.requestBody = []
        self.shared.requestsOverLimits.add(1, ordering: .relaxed)
        self.shared.logger.debug(
            "request over the header or body bounds; stream reset",
            metadata: ["http2.connection": "\(self.connectionID)", "http2.stream": "\(stream.id)"])
    }

    fileprivate func requestComplete(streamID: Int32) {
        guard let stream = self.streams[streamID], !stream.overLimits, let box = self.box else { return }
        self.shared.requestsReceived.add(1, ordering: .relaxed)
        let request = HTTP2ServerRequest(
            method: stream.method,
            path: stream.path,
            authority: stream.authority,
            headers: stream.headers,
            body: stream.requestBody,
            streamID: streamID
        )
        stream.headers = []
        stream.requestBody = []
        let context = HTTP2ServerConnectionContext(
            connectionID: self.connectionID,
            peerCertificate: self.peerCertificate,
            streamCount: self.streamCount
        )
        self.shared.handler(request, context, HTTP2ServerResponder(connection: box, streamID: streamID))
    }

    fileprivate func streamClosed(_ streamID: Int32) {
        self.streams.removeValue(forKey: streamID)
    }

    fileprivate func refusedStreamSent() {
        self.shared.streamsRefused.add(1, ordering: .relaxed)
    }

    fileprivate func goAwaySent(errorCode: UInt32) {
        // GOAWAYs this handler submits set `goAwaySent` first; any other one is nghttp2 reacting to a broken client.
        if !self.goAwaySent && errorCode != HTTP2ErrorCode.noError.rawValue {
            self.shared.protocolErrorGoAways.add(1, ordering: .relaxed)
            self.shared.logger.info(
                "closing a connection after a client protocol error",
                metadata: ["http2.connection": "\(self.connectionID)"])
        }
    }

    fileprivate func pingReceived() {
        self.shared.pingsReceived.add(1, ordering: .relaxed)
    }

    // MARK: Output

    private func scheduleFlush() {
        guard !self.inCallbacks, !self.flushScheduled, let context = self.context else { return }
        self.flushScheduled = true
        context.eventLoop.assumeIsolatedUnsafeUnchecked().execute {
            self.flushScheduled = false
            self.flush()
        }
    }

    private func flush() {
        guard let session = self.session, let context = self.context else { return }
        var failure: String?
        if let output = session.pendingOutput(allocator: context.channel.allocator, error: &failure) {
            context.writeAndFlush(self.wrapOutboundOut(output), promise: nil)
        }
        if failure != nil {
            context.close(promise: nil)
            return
        }
        if self.graceTimer == nil, session.isFinished {
            // The client closes on its own once it has read GOAWAY; closing first could reset unread responses.
            self.graceTimer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: Self.goAwayCloseGrace)
            {
                self.context?.close(promise: nil)
            }
        }
    }
}

// MARK: - nghttp2 callbacks (C functions; the handler comes back through user_data)

private func serverHandler(_ userData: UnsafeMutableRawPointer?) -> HTTP2ServerConnectionHandler {
    Unmanaged<HTTP2ServerConnectionHandler>.fromOpaque(userData!).takeUnretainedValue()
}

private func installServerCallbacks(_ callbacks: OpaquePointer) {
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        serverHandler(userData).beginStream(frame.pointee.hd.stream_id)
        return 0
    }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
        _, frame, name, nameLength, value, valueLength, flags, userData in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        let accepted = serverHandler(userData).header(
            streamID: frame.pointee.hd.stream_id,
            name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength),
            neverIndexed: flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0
        )
        // TEMPORAL_CALLBACK_FAILURE resets this stream only; the connection lives on.
        return accepted ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
        _, _, streamID, data, length, userData in
        serverHandler(userData).data(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
        guard let frame else { return 0 }
        let handler = serverHandler(userData)
        let flags = frame.pointee.hd.flags
        let ack = flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                handler.requestComplete(streamID: frame.pointee.hd.stream_id)
            }
        case NGHTTP2_PING.rawValue where !ack:
            handler.pingReceived()
        default:
            break
        }
        return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
        serverHandler(userData).streamClosed(streamID)
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
        guard let frame else { return 0 }
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_RST_STREAM.rawValue where frame.pointee.rst_stream.error_code == NGHTTP2_REFUSED_STREAM.rawValue:
            serverHandler(userData).refusedStreamSent()
        case NGHTTP2_GOAWAY.rawValue:
            serverHandler(userData).goAwaySent(errorCode: frame.pointee.goaway.error_code)
        default:
            break
        }
        return 0
    }
}
