import NIOSSL

/// Settings of an ``HTTP2Server``.
package struct HTTP2ServerConfiguration: Sendable {
    /// The address to bind; `127.0.0.1` by default.
    package var host: String
    /// The port; 0 picks an ephemeral port (read it from ``HTTP2Server/port``).
    package var port: Int
    /// The server certificate chain (leaf first).
    package var certificateChain: [NIOSSLCertificate]
    /// The private key of the leaf certificate.
    package var privateKey: NIOSSLPrivateKey
    /// When set, clients must present a certificate signed by one of these CAs (mutual TLS).
    package var clientCertificateTrustRoots: [NIOSSLCertificate]?
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced to new connections.
    package var maxConcurrentStreams: Int
    /// When set, each connection sends GOAWAY (NO_ERROR) after this many streams.
    package var goAwayAfterStreams: Int?
    /// Debug data of GOAWAYs sent because of `goAwayAfterStreams`.
    package var goAwayDebugData: [UInt8]
    /// Whether PINGs are acknowledged; `false` simulates a peer that stopped answering (tests of PING timeouts).
    package var acknowledgesPings: Bool
    /// Requests with more header fields (pseudo-headers included) are not handled: their stream is reset.
    package var maxRequestHeaderFields: Int
    /// Requests whose header list (name + value + 32 per field, after HPACK decoding) is larger are not
    /// handled either.
    package var maxRequestHeaderListBytes: Int
    /// Requests whose body grows beyond this are not handled: their stream is reset as soon as it passes the
    /// bound, so a client cannot make the server buffer without limit. APNs payloads are at most 5 KiB, so
    /// the simulator still answers every oversized payload up to this bound with 413 like APNs.
    package var maxRequestBodyBytes: Int

    /// Settings; `maxConcurrentStreams` defaults to 1000; requests are bounded to 100 header fields, 16 KiB of
    /// header list and 64 KiB of body.
    package init(
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
package struct HTTP2ServerStatistics: Sendable, Hashable {
    /// Connections accepted so far.
    package var connectionsAccepted: Int
    /// Connections open now.
    package var connectionsOpen: Int
    /// Complete requests delivered to the handler.
    package var requestsReceived: Int
    /// The most streams seen open at once on one connection.
    package var maxConcurrentStreamsSeen: Int
    /// Streams refused with REFUSED_STREAM because they arrived while a lowered SETTINGS_MAX_CONCURRENT_STREAMS
    /// was not yet acknowledged, or above the last stream id of a GOAWAY (legal races; clients re-send them).
    package var streamsRefused: Int
    /// GOAWAYs with an error code the server sent because a client broke the protocol, for instance by exceeding
    /// a stream limit it had acknowledged (a client bug; tests expect 0).
    package var protocolErrorGoAways: Int
    /// PING frames received (not counting ACKs).
    package var pingsReceived: Int
    /// Streams reset because the request broke the header or body bounds of the configuration.
    package var requestsOverLimits: Int
}
