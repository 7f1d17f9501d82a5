// The public surface of the HTTP2 module: requests, responses, errors and configuration shared by the client
// connection (`HTTP2ClientConnection`) and the server (`HTTP2Server`). Framing and HPACK come from libnghttp2;
// sockets, TLS, event loops and timers from SwiftNIO. See docs/http2.md.

import NIOCore
import NIOSSL

// MARK: - Headers

/// How HPACK may store a header field in the peer's dynamic table.
///
/// On a field a server received, `never` says the sender marked it never-indexed and `incremental` stands for
/// every other representation.
public enum HTTP2HeaderIndexing: Sendable, Hashable {
    /// Incremental indexing: later requests can refer to the field by index (the default).
    case incremental
    /// Literal never indexed: the field is never added to any table. Apple asks for this for `:path` and
    /// `authorization` (APNS.md §2).
    case never
    /// Incremental indexing the first time the connection sends a field of this name, never indexed after:
    /// the name enters both tables once and later fields refer to it, while their values, which differ from
    /// request to request, stay out and do not evict the entries that repeat. Apple asks for this for
    /// `apns-id`, `apns-expiration` and `apns-collapse-id` (APNS.md §2).
    case nameOnce
}

/// One HTTP/2 header field. Names are lower-case, as HTTP/2 requires.
public struct HTTP2Header: Sendable, Hashable {
    /// The field name, lower-case (`apns-topic`).
    public var name: String
    /// The field value.
    public var value: String
    /// How HPACK may index the field.
    public var indexing: HTTP2HeaderIndexing

    /// A header field; `indexing` defaults to incremental indexing.
    public init(_ name: String, _ value: String, indexing: HTTP2HeaderIndexing = .incremental) {
        self.name = name
        self.value = value
        self.indexing = indexing
    }
}

extension Array where Element == HTTP2Header {
    /// The value of the first field called `name` (compared case-insensitively), or `nil`.
    public func first(_ name: String) -> String? {
        let lowered = name.lowercased()
        return self.first { $0.name == lowered }?.value
    }
}

/// Request header fields with names fixed in the code, written once as bytes: the cheap way to send the same
/// fields on every request. The HTTP/2 client points nghttp2 at these bytes as they are, where ``HTTP2Header``
/// strings are first copied into a block on the event loop.
public struct HTTP2HeaderBlock: Sendable {
    struct Field: Sendable {
        var name: StaticString
        var value: Range<Int>
        var indexing: HTTP2HeaderIndexing
    }

    /// The values' bytes, one after the other.
    private(set) var values: [UInt8] = []
    private(set) var fields: [Field] = []

    /// An empty block with room for `fields` fields of `bytes` value bytes in all.
    public init(fields: Int = 0, bytes: Int = 0) {
        self.fields.reserveCapacity(fields)
        self.values.reserveCapacity(bytes)
    }

    /// Whether the block has no field.
    public var isEmpty: Bool { self.fields.isEmpty }

    /// Appends a field. `name` must be lower-case and not a pseudo-header (a programming error otherwise: it is a
    /// constant of the caller's code).
    public mutating func append(_ name: StaticString, _ value: String, indexing: HTTP2HeaderIndexing = .incremental) {
        precondition(
            name.utf8CodeUnitCount > 0 && name.utf8Start.pointee != UInt8(ascii: ":")
                && !UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount).contains {
                    $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")
                },
            "HTTP/2 header names are lower-case and not pseudo-headers: \(name)")
        let start = self.values.count
        value.withHeaderBytes { self.values.append(contentsOf: $0) }
        self.fields.append(Field(name: name, value: start..<self.values.count, indexing: indexing))
    }

    /// The fields as ``HTTP2Header`` values, in order (for tests and logs; the client does not make them).
    public var headers: [HTTP2Header] {
        self.fields.map { field in
            HTTP2Header(
                field.name.description, String(decoding: self.values[field.value], as: UTF8.self),
                indexing: field.indexing)
        }
    }
}

// MARK: - Client requests and responses

/// A request the client sends on one stream.
public struct HTTP2Request: Sendable {
    /// `:method`, for instance `POST`.
    public var method: String
    /// `:path`, for instance `/3/device/<token>`.
    public var path: String
    /// How HPACK may index `:path`; `never` by default (Apple's HPACK guidance: device tokens differ per request).
    public var pathIndexing: HTTP2HeaderIndexing
    /// `:authority`; `nil` uses the connection's host (and port when it is not 443).
    public var authority: String?
    /// Regular header fields, sent in this order after the pseudo-headers.
    public var headers: [HTTP2Header]
    /// More regular header fields, sent after ``headers``: the same, made cheaper to send.
    public var fields: HTTP2HeaderBlock
    /// The request body; empty sends no DATA frame.
    public var body: [UInt8]

    /// A request. `pathIndexing` defaults to `.never`.
    public init(
        method: String = "POST",
        path: String,
        pathIndexing: HTTP2HeaderIndexing = .never,
        authority: String? = nil,
        headers: [HTTP2Header] = [],
        fields: HTTP2HeaderBlock = HTTP2HeaderBlock(),
        body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.pathIndexing = pathIndexing
        self.authority = authority
        self.headers = headers
        self.fields = fields
        self.body = body
    }
}

/// A complete response: status, headers (without pseudo-headers) and body bytes, exactly as received.
public struct HTTP2Response: Sendable {
    /// `:status`.
    public var status: Int
    /// Regular header fields in the order received.
    public var headers: [HTTP2Header]
    /// The body bytes, whatever they are (a body that is not what the caller expects is still delivered).
    public var body: [UInt8]

    /// A response.
    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

// MARK: - GOAWAY and errors

/// An HTTP/2 error code (RFC 9113 §7), as carried by GOAWAY and RST_STREAM.
public struct HTTP2ErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// The numeric code.
    public var rawValue: UInt32

    /// An error code from its number.
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// NO_ERROR (0x0): graceful shutdown.
    public static let noError = HTTP2ErrorCode(0x0)
    /// PROTOCOL_ERROR (0x1).
    public static let protocolError = HTTP2ErrorCode(0x1)
    /// INTERNAL_ERROR (0x2).
    public static let internalError = HTTP2ErrorCode(0x2)
    /// REFUSED_STREAM (0x7): the stream was not processed and may be retried.
    public static let refusedStream = HTTP2ErrorCode(0x7)
    /// CANCEL (0x8): the stream is no longer needed.
    public static let cancel = HTTP2ErrorCode(0x8)
    /// ENHANCE_YOUR_CALM (0xb).
    public static let enhanceYourCalm = HTTP2ErrorCode(0xb)

    /// The RFC name (`REFUSED_STREAM`) or `0x…` for unknown codes.
    public var description: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return Int(self.rawValue) < names.count ? names[Int(self.rawValue)] : "0x" + String(self.rawValue, radix: 16)
    }
}

/// A GOAWAY frame: the last stream the sender processed or may process, an error code and debug data.
/// APNs fills the debug data with JSON such as `{"reason":"Shutdown"}`.
public struct HTTP2GoAway: Sendable, Hashable {
    /// Streams with a higher id were not processed and are safe to re-send on another connection.
    public var lastStreamID: Int32
    /// Why the connection is going away.
    public var errorCode: HTTP2ErrorCode
    /// Opaque debug data (APNs: a JSON object with `reason`).
    public var debugData: [UInt8]

    /// A GOAWAY description.
    public init(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8] = []) {
        self.lastStreamID = lastStreamID
        self.errorCode = errorCode
        self.debugData = debugData
    }

    /// The debug data as text for logs and errors: at most the first 256 bytes, invalid UTF-8 replaced and
    /// control characters escaped, since the server chooses these bytes (up to a whole frame of them).
    public var debugText: String { HTTP2Text.excerpt(self.debugData, limit: 256) }
}

/// An error of the HTTP/2 layer: a ``Code`` saying what a caller can do about it, a message and the cause.
public struct HTTP2Error: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in terms of what a caller may do next.
    public enum Code: String, Sendable, Hashable {
        /// The server did not process the request (above a GOAWAY's last stream id, queued when the connection
        /// began closing, or REFUSED_STREAM): safe to re-send on a new connection.
        case notProcessed
        /// The connection was lost (TCP/TLS failure, unanswered PING, protocol error) before the response
        /// arrived; the server may or may not have processed it. The APNs pool re-sends it.
        case connectionLost
        /// No response within the request timeout; the stream was reset with CANCEL.
        case timeout
        /// The response was malformed (no `:status`, invalid header block) or the server reset the stream.
        case malformedResponse
        /// The connection could not be established (DNS, TCP, TLS handshake, ALPN not `h2`, no SETTINGS).
        case connectFailed
        /// The request itself is invalid (for instance a header name that is not lower-case).
        case invalidRequest
        /// The connection was closed by its owner; nothing more is sent on it.
        case closed
        /// The calling task was cancelled; the stream, if open, was reset with CANCEL.
        case cancelled
        /// The server failed to start (bind, TLS material).
        case serverStartFailed
    }

    /// What went wrong.
    public var code: Code
    /// A sentence for people, without secrets.
    public var message: String
    /// The GOAWAY that caused the error, when there was one.
    public var goAway: HTTP2GoAway?
    /// The underlying error, when there was one.
    public var cause: (any Error & Sendable)?

    /// An error.
    public init(
        _ code: Code, _ message: String, goAway: HTTP2GoAway? = nil, cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.goAway = goAway
        self.cause = cause
    }

    /// Whether the request may be sent again on a new connection: `notProcessed` and `connectionLost`.
    public var isRetryableOnNewConnection: Bool { self.code == .notProcessed || self.code == .connectionLost }

    /// `code: message (cause)`.
    public var description: String {
        var text = "\(self.code.rawValue): \(self.message)"
        if let goAway = self.goAway {
            text += " [GOAWAY \(goAway.errorCode) last-stream \(goAway.lastStreamID) \(goAway.debugText)]"
        }
        if let cause = self.cause { text += " (\(cause))" }
        return text
    }
}

// MARK: - TLS

/// TLS settings of a client connection: TLS 1.2+, ALPN `h2`, the server verified against the system roots plus
/// optional extra CAs, and an optional client certificate (mutual TLS, for APNs certificate authentication).
public struct HTTP2ClientTLS: Sendable {
    /// A PEM file of extra CA certificates trusted in addition to the system roots (tests, private CAs).
    public var additionalTrustRootsPEMFile: String?
    /// Trust only `additionalTrustRootsPEMFile`, not the system roots (tests that must refuse a public CA).
    public var trustSystemRoots: Bool
    /// The client certificate chain for mutual TLS; empty for none.
    public var clientCertificateChain: [NIOSSLCertificate]
    /// The private key of `clientCertificateChain`'s first certificate.
    public var clientPrivateKey: NIOSSLPrivateKey?
    /// The name the server certificate must carry and the SNI sent; `nil` uses the host connected to.
    public var serverName: String?

    /// TLS settings; all optional.
    public init(
        additionalTrustRootsPEMFile: String? = nil,
        trustSystemRoots: Bool = true,
        clientCertificateChain: [NIOSSLCertificate] = [],
        clientPrivateKey: NIOSSLPrivateKey? = nil,
        serverName: String? = nil
    ) {
        self.additionalTrustRootsPEMFile = additionalTrustRootsPEMFile
        self.trustSystemRoots = trustSystemRoots
        self.clientCertificateChain = clientCertificateChain
        self.clientPrivateKey = clientPrivateKey
        self.serverName = serverName
    }
}

// MARK: - Client

/// Settings of one client connection.
public struct HTTP2ClientConfiguration: Sendable {
    /// The host name or address; resolved afresh (NIO's resolver, no cache) for every connection.
    public var host: String
    /// The TCP port (APNs: 443 or 2197).
    public var port: Int
    /// TLS settings.
    public var tls: HTTP2ClientTLS
    /// Local cap on concurrent streams; the effective limit is the smaller of this and the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS. Requests beyond it wait in a FIFO queue.
    public var maxConcurrentStreams: Int
    /// How long a request may wait for its response, queueing included. On expiry it fails with
    /// ``HTTP2Error/Code/timeout`` and its stream is reset with CANCEL.
    public var requestTimeout: Duration
    /// How long TCP connect + TLS handshake + the server's first SETTINGS may take.
    public var connectTimeout: Duration
    /// After this long without any frame received, the connection sends a PING (default 60 s; Apple suggests
    /// one after an hour of inactivity at most, and NAT/firewalls drop idle flows far sooner).
    public var idlePingInterval: Duration
    /// A PING not acknowledged within this time closes the connection (requests fail with `connectionLost`).
    public var pingTimeout: Duration
    /// Responses with a larger body fail with `malformedResponse` (APNs bodies are tiny JSON objects).
    public var maxResponseBodyBytes: Int
    /// Responses with more header fields (pseudo-headers included) fail with `malformedResponse` and their
    /// stream is reset; the connection stays usable. APNs sends about five.
    public var maxResponseHeaderFields: Int
    /// Responses whose header list is larger fail the same way. Counted as HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE
    /// counts (name + value + 32 per field, after HPACK decoding, so a server cannot amplify a few bytes of
    /// indexed fields into megabytes), and announced to the server in that setting.
    public var maxResponseHeaderListBytes: Int
    /// The only response header fields kept in ``HTTP2Response/headers`` (lower-case names); `nil` keeps every
    /// field. The others still count against the bounds above but cost no strings: a client that reads two
    /// headers need not copy a server's `date` and `server` for every response.
    public var keptResponseHeaders: [String]?

    /// Settings with APNs-friendly defaults: 1000 streams, 30 s request timeout, 10 s connect timeout,
    /// PING after 60 s idle with a 10 s timeout, 64 KiB response bodies, 100 header fields and 16 KiB of
    /// header list per response.
    public init(
        host: String,
        port: Int,
        tls: HTTP2ClientTLS = HTTP2ClientTLS(),
        maxConcurrentStreams: Int = 1000,
        requestTimeout: Duration = .seconds(30),
        connectTimeout: Duration = .seconds(10),
        idlePingInterval: Duration = .seconds(60),
        pingTimeout: Duration = .seconds(10),
        maxResponseBodyBytes: Int = 64 * 1024,
        maxResponseHeaderFields: Int = 100,
        maxResponseHeaderListBytes: Int = 16 * 1024,
        keptResponseHeaders: [String]? = nil
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.maxConcurrentStreams = maxConcurrentStreams
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.idlePingInterval = idlePingInterval
        self.pingTimeout = pingTimeout
        self.maxResponseBodyBytes = maxResponseBodyBytes
        self.maxResponseHeaderFields = maxResponseHeaderFields
        self.maxResponseHeaderListBytes = maxResponseHeaderListBytes
        self.keptResponseHeaders = keptResponseHeaders
    }
}

/// Why a client connection closed.
public enum HTTP2CloseReason: Sendable, Hashable {
    /// The owner called ``HTTP2ClientConnection/close()``.
    case closedLocally
    /// The server sent GOAWAY and every processed stream finished.
    case goAway(HTTP2GoAway)
    /// A PING went unanswered within the PING timeout.
    case pingTimeout
    /// The transport failed or the peer broke the protocol; the text says how.
    case connectionLost(String)
}

/// A snapshot of a client connection's state, for a pool.
public struct HTTP2ConnectionState: Sendable, Hashable {
    /// Streams open now.
    public var activeStreams: Int
    /// Requests waiting for a stream.
    public var queuedRequests: Int
    /// The effective stream limit: the smaller of the server's SETTINGS_MAX_CONCURRENT_STREAMS and the local cap.
    public var maxConcurrentStreams: Int
    /// Whether ``HTTP2ClientConnection/send(_:)`` accepts new requests (false after GOAWAY, loss or close).
    public var isAcceptingRequests: Bool
    /// The GOAWAY received, if any.
    public var goAway: HTTP2GoAway?
    /// PING frames acknowledged by the server so far.
    public var pingsAcknowledged: Int
    /// Streams opened so far on this connection.
    public var streamsOpened: Int
    /// Complete responses received so far on this connection (any status).
    public var responsesReceived: Int
}

// MARK: - Server

/// A request as the server received it on one stream.
public struct HTTP2ServerRequest: Sendable {
    /// `:method`.
    public var method: String
    /// `:path`.
    public var path: String
    /// `:authority`, empty when absent.
    public var authority: String
    /// Regular header fields in the order received.
    public var headers: [HTTP2Header]
    /// The body bytes.
    public var body: [UInt8]
    /// The stream id.
    public var streamID: Int32
}

/// A response the server sends on a stream.
public struct HTTP2ServerResponse: Sendable {
    /// `:status`; `nil` sends a header block without `:status` (only to test clients against malformed responses).
    public var status: Int?
    /// Regular header fields.
    public var headers: [HTTP2Header]
    /// The body; empty ends the stream with the HEADERS frame.
    public var body: [UInt8]

    /// A response.
    public init(status: Int?, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What the server knows about the connection a request arrived on.
public struct HTTP2ServerConnectionContext: Sendable {
    /// The connection's id, unique within the server (1, 2, …).
    public var connectionID: Int
    /// The client certificate presented in the TLS handshake, when the server asked for one.
    public var peerCertificate: NIOSSLCertificate?
    /// Streams opened on this connection so far, this one included.
    public var streamCount: Int
}

/// Answers one stream, once, from any thread, at any later time. Answers after the connection closed are dropped.
public struct HTTP2ServerResponder: Sendable {
    let connection: ServerConnectionBox
    let streamID: Int32

    /// Sends `response` on the stream.
    public func respond(_ response: HTTP2ServerResponse) {
        self.connection.respond(streamID: self.streamID, response: response)
    }

    /// Resets the stream with `errorCode` instead of answering.
    public func reset(_ errorCode: HTTP2ErrorCode) {
        self.connection.reset(streamID: self.streamID, errorCode: errorCode)
    }
}

/// The server's request handler: called on the connection's event loop with each complete request; must not
/// block. It answers through the responder, now or later.
public typealias HTTP2ServerHandler =
    @Sendable (HTTP2ServerRequest, HTTP2ServerConnectionContext, HTTP2ServerResponder) -> Void

/// Settings of an ``HTTP2Server``.
public struct HTTP2ServerConfiguration: Sendable {
    /// The address to bind; `127.0.0.1` by default.
    public var host: String
    /// The port; 0 picks an ephemeral port (read it from ``HTTP2Server/port``).
    public var port: Int
    /// The server certificate chain (leaf first).
    public var certificateChain: [NIOSSLCertificate]
    /// The private key of the leaf certificate.
    public var privateKey: NIOSSLPrivateKey
    /// When set, clients must present a certificate signed by one of these CAs (mutual TLS).
    public var clientCertificateTrustRoots: [NIOSSLCertificate]?
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced to new connections.
    public var maxConcurrentStreams: Int
    /// When set, each connection sends GOAWAY (NO_ERROR) after this many streams.
    public var goAwayAfterStreams: Int?
    /// Debug data of GOAWAYs sent because of `goAwayAfterStreams`.
    public var goAwayDebugData: [UInt8]
    /// Whether PINGs are acknowledged; `false` simulates a peer that stopped answering (tests of PING timeouts).
    public var acknowledgesPings: Bool
    /// Requests with more header fields (pseudo-headers included) are not handled: their stream is reset.
    public var maxRequestHeaderFields: Int
    /// Requests whose header list (name + value + 32 per field, after HPACK decoding) is larger are not
    /// handled either.
    public var maxRequestHeaderListBytes: Int
    /// Requests whose body grows beyond this are not handled: their stream is reset as soon as it passes the
    /// bound, so a client cannot make the server buffer without limit. APNs payloads are at most 5 KiB, so
    /// the simulator still answers every oversized payload up to this bound with 413 like APNs.
    public var maxRequestBodyBytes: Int

    /// Settings; `maxConcurrentStreams` defaults to 1000; requests are bounded to 100 header fields, 16 KiB of
    /// header list and 64 KiB of body.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientCertificateTrustRoots: [NIOSSLCertificate]? = nil,
        maxConcurrentStreams: Int = 1000,
        goAwayAfterStreams: Int? = nil,
        goAwayDebugData: [UInt8] = [],
        acknowledgesPings: Bool = true,
        maxRequestHeaderFields: Int = 100,
        maxRequestHeaderListBytes: Int = 16 * 1024,
        maxRequestBodyBytes: Int = 64 * 1024
    ) {
        self.host = host
        self.port = port
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.clientCertificateTrustRoots = clientCertificateTrustRoots
        self.maxConcurrentStreams = maxConcurrentStreams
        self.goAwayAfterStreams = goAwayAfterStreams
        self.goAwayDebugData = goAwayDebugData
        self.acknowledgesPings = acknowledgesPings
        self.maxRequestHeaderFields = maxRequestHeaderFields
        self.maxRequestHeaderListBytes = maxRequestHeaderListBytes
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }
}

/// Counters of an ``HTTP2Server``, for tests and benchmarks.
public struct HTTP2ServerStatistics: Sendable, Hashable {
    /// Connections accepted so far.
    public var connectionsAccepted: Int
    /// Connections open now.
    public var connectionsOpen: Int
    /// Complete requests delivered to the handler.
    public var requestsReceived: Int
    /// The most streams seen open at once on one connection.
    public var maxConcurrentStreamsSeen: Int
    /// Streams refused with REFUSED_STREAM because they arrived while a lowered SETTINGS_MAX_CONCURRENT_STREAMS
    /// was not yet acknowledged, or above the last stream id of a GOAWAY (legal races; clients re-send them).
    public var streamsRefused: Int
    /// GOAWAYs with an error code the server sent because a client broke the protocol, for instance by exceeding
    /// a stream limit it had acknowledged (a client bug; tests expect 0).
    public var protocolErrorGoAways: Int
    /// PING frames received (not counting ACKs).
    public var pingsReceived: Int
    /// Streams reset because the request broke the header or body bounds of the configuration.
    public var requestsOverLimits: Int
}

/// Text a server or client chose, made safe for logs and errors.
public enum HTTP2Text {
    /// At most `limit` bytes of `bytes` as UTF-8 (invalid sequences replaced), control characters written as
    /// `\u{..}`, and `...` when cut.
    public static func excerpt(_ bytes: some Collection<UInt8>, limit: Int) -> String {
        let cut = bytes.count > limit
        var text = ""
        for scalar in String(decoding: bytes.prefix(max(limit, 0)), as: UTF8.self).unicodeScalars {
            if scalar.properties.generalCategory == .control {
                text += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return cut ? text + "..." : text
    }
}
