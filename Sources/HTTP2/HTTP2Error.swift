import SafeText

/// An HTTP/2 error code (RFC 9113 §7), as carried by GOAWAY and RST_STREAM.
package struct HTTP2ErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// The numeric code.
    package var rawValue: UInt32

    /// An error code from its number.
    package init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// NO_ERROR (0x0): graceful shutdown.
    package static let noError = HTTP2ErrorCode(0x0)
    /// PROTOCOL_ERROR (0x1).
    package static let protocolError = HTTP2ErrorCode(0x1)
    /// INTERNAL_ERROR (0x2).
    package static let internalError = HTTP2ErrorCode(0x2)
    /// REFUSED_STREAM (0x7): the stream was not processed and may be retried.
    package static let refusedStream = HTTP2ErrorCode(0x7)
    /// CANCEL (0x8): the stream is no longer needed.
    package static let cancel = HTTP2ErrorCode(0x8)
    /// ENHANCE_YOUR_CALM (0xb).
    package static let enhanceYourCalm = HTTP2ErrorCode(0xb)

    /// The RFC name (`REFUSED_STREAM`) or `0x…` for unknown codes.
    package var description: String {
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
package struct HTTP2GoAway: Sendable, Hashable {
    /// Streams with a higher id were not processed and are safe to re-send on another connection.
    package var lastStreamID: Int32
    /// Why the connection is going away.
    package var errorCode: HTTP2ErrorCode
    /// Opaque debug data (APNs: a JSON object with `reason`).
    package var debugData: [UInt8]

    /// A GOAWAY description.
    package init(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8] = []) {
        self.lastStreamID = lastStreamID
        self.errorCode = errorCode
        self.debugData = debugData
    }

    /// The debug data as text for logs and errors: at most the first 256 bytes, invalid UTF-8 replaced and
    /// control characters escaped, since the server chooses these bytes (up to a whole frame of them).
    package var debugText: String { SafeText.excerpt(bytes: self.debugData, maxBytes: 256) }
}

/// An error of the HTTP/2 layer: a ``Code`` saying what a caller can do about it, a message and the cause.
package struct HTTP2Error: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in terms of what a caller may do next.
    package enum Code: String, Sendable, Hashable {
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
    package var code: Code
    /// A sentence for people, without secrets.
    package var message: String
    /// The GOAWAY that caused the error, when there was one.
    package var goAway: HTTP2GoAway?
    /// The underlying error, when there was one.
    package var cause: (any Error & Sendable)?

    /// An error.
    package init(
        _ code: Code, _ message: String, goAway: HTTP2GoAway? = nil, cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.goAway = goAway
        self.cause = cause
    }

    /// Whether the request may be sent again on a new connection: `notProcessed` and `connectionLost`.
    package var isRetryableOnNewConnection: Bool { self.code == .notProcessed || self.code == .connectionLost }

    /// `code: message (cause)`.
    package var description: String {
        var text = "\(self.code.rawValue): \(self.message)"
        if let goAway = self.goAway {
            text += " [GOAWAY \(goAway.errorCode) last-stream \(goAway.lastStreamID) \(goAway.debugText)]"
        }
        if let cause = self.cause { text += " (\(cause))" }
        return text
    }
}
