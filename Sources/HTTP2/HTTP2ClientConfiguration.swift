import EgressProxy
import NIOSSL

/// TLS settings of a client connection: TLS 1.2+, ALPN `h2`, the server verified against the system roots plus
/// optional extra CAs, and an optional client certificate (mutual TLS, for APNs certificate authentication).
package struct HTTP2ClientTLS: Sendable {
    /// A PEM file of extra CA certificates trusted in addition to the system roots (tests, private CAs).
    package var additionalTrustRootsPEMFile: String?
    /// Trust only `additionalTrustRootsPEMFile`, not the system roots (tests that must refuse a package CA).
    package var trustSystemRoots: Bool
    /// The client certificate chain for mutual TLS; empty for none.
    package var clientCertificateChain: [NIOSSLCertificate]
    /// The private key of `clientCertificateChain`'s first certificate.
    package var clientPrivateKey: NIOSSLPrivateKey?
    /// The name the server certificate must carry and the SNI sent; `nil` uses the host connected to.
    package var serverName: String?

    /// TLS settings; all optional.
    package init(
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

/// Settings of one client connection.
package struct HTTP2ClientConfiguration: Sendable {
    /// The host name or address; resolved afresh (NIO's resolver, no cache) for every connection.
    package var host: String
    /// The TCP port (APNs: 443 or 2197).
    package var port: Int
    /// The HTTP proxy whose `CONNECT` tunnel the connection goes through; `nil` connects directly. TLS is verified
    /// against ``host`` either way.
    package var proxy: EgressProxy?
    /// TLS settings.
    package var tls: HTTP2ClientTLS
    /// Local cap on concurrent streams; the effective limit is the smaller of this and the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS. Requests beyond it wait in a FIFO queue.
    package var maxConcurrentStreams: Int
    /// How long a request may wait for its response, queueing included. On expiry it fails with
    /// ``HTTP2Error/Code/timeout`` and its stream is reset with CANCEL.
    package var requestTimeout: Duration
    /// How long TCP connect (and the proxy's answer to `CONNECT`) + TLS handshake + the server's first SETTINGS may
    /// take, together.
    package var connectTimeout: Duration
    /// After this long without any frame received, the connection sends a PING (default 60 s; Apple suggests
    /// one after an hour of inactivity at most, and NAT/firewalls drop idle flows far sooner).
    package var idlePingInterval: Duration
    /// A PING not acknowledged within this time closes the connection (requests fail with `connectionLost`).
    package var pingTimeout: Duration
    /// Responses with a larger body fail with `malformedResponse` (APNs bodies are tiny JSON objects).
    package var maxResponseBodyBytes: Int
    /// Responses with more header fields (pseudo-headers included) fail with `malformedResponse` and their
    /// stream is reset; the connection stays usable. APNs sends about five.
    package var maxResponseHeaderFields: Int
    /// Responses whose header list is larger fail the same way. Counted as HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE
    /// counts (name + value + 32 per field, after HPACK decoding, so a server cannot amplify a few bytes of
    /// indexed fields into megabytes), and announced to the server in that setting.
    package var maxResponseHeaderListBytes: Int
    /// The only response header fields kept in ``HTTP2Response/headers`` (lower-case names); `nil` keeps every
    /// field. The others still count against the bounds above but cost no strings: a client that reads two
    /// headers need not copy a server's `date` and `server` for every response.
    package var keptResponseHeaders: [String]?

    /// Settings with APNs-friendly defaults: 1000 streams, 30 s request timeout, 10 s connect timeout,
    /// PING after 60 s idle with a 10 s timeout, 64 KiB response bodies, 100 header fields and 16 KiB of
    /// header list per response.
    package init(
        host: String,
        port: Int,
        proxy: EgressProxy? = nil,
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
        self.proxy = proxy
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
