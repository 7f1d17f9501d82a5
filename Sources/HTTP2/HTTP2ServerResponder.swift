import NIOSSL

/// What the server knows about the connection a request arrived on.
package struct HTTP2ServerConnectionContext: Sendable {
    /// The connection's id, unique within the server (1, 2, …).
    package var connectionID: Int
    /// The client certificate presented in the TLS handshake, when the server asked for one.
    package var peerCertificate: NIOSSLCertificate?
    /// Streams opened on this connection so far, this one included.
    package var streamCount: Int
}

/// Answers one stream, once, from any thread, at any later time. Answers after the connection closed are dropped.
package struct HTTP2ServerResponder: Sendable {
    let connection: ServerConnectionBox
    let streamID: Int32

    /// Sends `response` on the stream.
    package func respond(_ response: HTTP2ServerResponse) {
        self.connection.respond(streamID: self.streamID, response: response)
    }

    /// Resets the stream with `errorCode` instead of answering.
    package func reset(_ errorCode: HTTP2ErrorCode) {
        self.connection.reset(streamID: self.streamID, errorCode: errorCode)
    }
}

/// The server's request handler: called on the connection's event loop with each complete request; must not
/// block. It answers through the responder, now or later.
package typealias HTTP2ServerHandler =
    @Sendable (HTTP2ServerRequest, HTTP2ServerConnectionContext, HTTP2ServerResponder) -> Void
