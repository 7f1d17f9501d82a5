import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A deliberately minimal HTTP/2-over-TLS server that writes raw frames chosen by a test: header blocks with
/// 10 000 fields, HPACK references that decode to megabytes, a megabyte-long header, GOAWAY right after
/// SETTINGS. The real server (`HTTP2Server`, nghttp2) refuses to produce such frames, which is why the client's
/// defences against hostile servers need this one.
///
/// It reads only frame headers: the client's SETTINGS are acknowledged, PINGs answered, and when a request
/// stream ends (END_STREAM on HEADERS or DATA) the behaviour's bytes for that stream are written.
package final class HostileHTTP2Server: Sendable {
    /// What the server does on each connection.
    package enum Behaviour: Sendable {
        /// Answers each request stream with the bytes the closure returns for its stream id (build them with
        /// ``HTTP2Frames``); an empty answer leaves the stream unanswered.
        case answer(@Sendable (_ streamID: UInt32) -> [UInt8])
        /// Sends GOAWAY (last stream 0, NO_ERROR) right after its SETTINGS: a server that accepts connections
        /// but serves nothing.
        case goAwayAtOnce
        /// Sends an unsolicited PING ACK and then GOAWAY (last stream 0, NO_ERROR) right after its SETTINGS: a
        /// server that looks alive for a moment and serves nothing.
        case pingAckThenGoAway
    }

    private let listener: CountingListener

    /// The bound port on 127.0.0.1.
    package var port: Int { self.listener.port }

    /// TLS connections accepted so far.
    package var connectionsAccepted: Int { self.listener.connectionsAccepted }

    private init(listener: CountingListener) {
        self.listener = listener
    }

    /// Starts a server on 127.0.0.1 with `tls`'s server certificate (ALPN `h2`).
    package static func start(tls: TestTLS, behaviour: Behaviour) async throws -> HostileHTTP2Server {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try tls.serverCertificateChain().map { .certificate($0) },
            privateKey: .privateKey(try tls.serverPrivateKey())
        )
        configuration.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: configuration)
        let listener = try await CountingListener.bind { channel in
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
            try channel.pipeline.syncOperations.addHandler(RawHTTP2Handler(behaviour: behaviour))
        }
        return HostileHTTP2Server(listener: listener)
    }

    /// Stops listening.
    package func shutdown() async {
        await self.listener.shutdown()
    }
}

private final class RawHTTP2Handler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let behaviour: HostileHTTP2Server.Behaviour
    var buffer = ByteBuffer()
    var sawPreface = false

    init(behaviour: HostileHTTP2Server.Behaviour) {
        self.behaviour = behaviour
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            var bytes = HTTP2Frames.settings()
            switch self.behaviour {
            case .goAwayAtOnce:
                bytes += HTTP2Frames.goAway(lastStreamID: 0, errorCode: 0)
            case .pingAckThenGoAway:
                bytes += HTTP2Frames.frame(type: 0x6, flags: 0x1, stream: 0, payload: Array(repeating: 0, count: 8))
                bytes += HTTP2Frames.goAway(lastStreamID: 0, errorCode: 0)
            case .answer:
                break
            }
            self.write(bytes, context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = self.unwrapInboundIn(data)
        self.buffer.writeBuffer(&incoming)
        if !self.sawPreface {
            guard self.buffer.readableBytes >= 24 else { return }
            self.buffer.moveReaderIndex(forwardBy: 24)
            self.sawPreface = true
        }
        while self.buffer.readableBytes >= 9,
            let header = self.buffer.getBytes(at: self.buffer.readerIndex, length: 9)
        {
            let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
            guard self.buffer.readableBytes >= 9 + length else { return }
            let payload = self.buffer.getBytes(at: self.buffer.readerIndex + 9, length: length) ?? []
            self.buffer.moveReaderIndex(forwardBy: 9 + length)
            let type = header[3]
            let flags = header[4]
            let stream =
                (UInt32(header[5]) << 24 | UInt32(header[6]) << 16 | UInt32(header[7]) << 8
                    | UInt32(header[8])) & 0x7FFF_FFFF
            switch type {
            case 0x4 where flags & 0x1 == 0:
                self.write(HTTP2Frames.frame(type: 0x4, flags: 0x1, stream: 0, payload: []), context: context)
            case 0x6 where flags & 0x1 == 0:
                self.write(HTTP2Frames.frame(type: 0x6, flags: 0x1, stream: 0, payload: payload), context: context)
            case 0x0, 0x1:
                if flags & 0x1 != 0, case .answer(let answer) = self.behaviour {
                    let bytes = answer(stream)
                    if !bytes.isEmpty { self.write(bytes, context: context) }
                }
            default:
                break
            }
        }
        self.buffer.discardReadBytes()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func write(_ bytes: [UInt8], context: ChannelHandlerContext) {
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }
}

/// Raw HTTP/2 frames and HPACK pieces (RFC 9113, RFC 7541) for ``HostileHTTP2Server``.
package enum HTTP2Frames {
    /// The largest frame payload a peer accepts without a larger SETTINGS_MAX_FRAME_SIZE.
    package static let maxFramePayload = 16_384

    /// One frame.
    package static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [
            UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length), type, flags,
            UInt8(truncatingIfNeeded: stream >> 24), UInt8(truncatingIfNeeded: stream >> 16),
            UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream),
        ] + payload
    }

    /// A whole response on `stream`: `:status`, `headers` as literals, and `body` in DATA frames of at most
    /// ``maxFramePayload`` bytes (none when empty: END_STREAM then rides on HEADERS).
    package static func response(
        stream: UInt32, status: Int, headers: [(String, String)] = [], body: [UInt8] = []
    ) -> [UInt8] {
        var block = self.status(status)
        for (name, value) in headers { block += self.literal(name, value) }
        var bytes = self.headers(stream: stream, block: block, endStream: body.isEmpty)
        var offset = 0
        while offset < body.count {
            let end = min(offset + self.maxFramePayload, body.count)
            bytes += self.data(stream: stream, Array(body[offset..<end]), endStream: end == body.count)
            offset = end
        }
        return bytes
    }

    /// An empty SETTINGS frame (all defaults).
    package static func settings() -> [UInt8] {
        self.frame(type: 0x4, flags: 0, stream: 0, payload: [])
    }

    /// GOAWAY.
    package static func goAway(lastStreamID: UInt32, errorCode: UInt32, debugData: [UInt8] = []) -> [UInt8] {
        var payload: [UInt8] = []
        for value in [lastStreamID, errorCode] {
            payload += [
                UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value),
            ]
        }
        return self.frame(type: 0x7, flags: 0, stream: 0, payload: payload + debugData)
    }

    /// A header block as HEADERS plus as many CONTINUATION frames as its size needs.
    package static func headers(stream: UInt32, block: [UInt8], endStream: Bool) -> [UInt8] {
        var chunks: [[UInt8]] = []
        var offset = 0
        repeat {
            let end = min(offset + self.maxFramePayload, block.count)
            chunks.append(Array(block[offset..<end]))
            offset = end
        } while offset < block.count
        var bytes: [UInt8] = []
        for (index, chunk) in chunks.enumerated() {
            let last = index == chunks.count - 1
            let flags: UInt8 = (last ? 0x4 : 0) | (index == 0 && endStream ? 0x1 : 0)
            bytes += self.frame(type: index == 0 ? 0x1 : 0x9, flags: flags, stream: stream, payload: chunk)
        }
        return bytes
    }

    /// A DATA frame.
    package static func data(stream: UInt32, _ payload: [UInt8], endStream: Bool) -> [UInt8] {
        self.frame(type: 0x0, flags: endStream ? 0x1 : 0, stream: stream, payload: payload)
    }

    /// HPACK: an indexed field (static table 8 is `:status 200`, 12 `:status 400`; 62 is the newest dynamic
    /// entry).
    package static func indexed(_ index: Int) -> [UInt8] {
        self.integer(index, prefixBits: 7, firstByte: 0x80)
    }

    /// HPACK: `:status` with any value, as a literal without indexing of static name 8.
    package static func status(_ status: Int) -> [UInt8] {
        self.status(text: String(status))
    }

    /// HPACK: `:status` with any text, digits or not.
    package static func status(text: String) -> [UInt8] {
        self.integer(8, prefixBits: 4, firstByte: 0x00) + self.string(text)
    }

    /// HPACK: a literal field with a new name, not indexed.
    package static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00] + self.string(name) + self.string(value)
    }

    /// HPACK: a literal field with a new name, added to the dynamic table (so ``indexed(_:)`` 62 repeats it).
    package static func literalIndexed(_ name: String, _ value: String) -> [UInt8] {
        [0x40] + self.string(name) + self.string(value)
    }

    /// An HPACK string literal without Huffman coding.
    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return self.integer(bytes.count, prefixBits: 7, firstByte: 0x00) + bytes
    }

    /// An HPACK integer with an N-bit prefix (RFC 7541 §5.1).
    static func integer(_ value: Int, prefixBits: Int, firstByte: UInt8) -> [UInt8] {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            return [firstByte | UInt8(value)]
        }
        var bytes = [firstByte | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            bytes.append(UInt8(rest % 128) | 0x80)
            rest /= 128
        }
        bytes.append(UInt8(rest))
        return bytes
    }
}
