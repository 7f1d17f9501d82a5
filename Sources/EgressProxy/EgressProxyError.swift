/// A connection through an HTTP proxy failed before TLS could start: which proxy (never its credentials), which
/// target, and what happened (docs/operations.md, "When the egress proxy fails").
package struct EgressProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    package enum Code: String, Sendable, Hashable {
        /// No TCP connection to the proxy.
        case proxyUnreachable
        /// The proxy answered `CONNECT` with a status other than 2xx (``EgressProxyError/status``).
        case refused
        /// The proxy's answer is not HTTP, or goes past a bound.
        case malformedAnswer
        /// The proxy did not answer within the connect timeout.
        case noAnswer
        /// The proxy closed the connection (or it failed) before answering.
        case closedBeforeAnswer
    }

    /// What went wrong.
    package var code: Code
    /// The proxy, as ``EgressProxy/description`` shows it (credentials masked).
    package var proxy: String
    /// The `CONNECT` target, `host:port`.
    package var target: String
    /// The status the proxy answered, for ``Code/refused``.
    package var status: Int?
    /// What happened, in words.
    package var detail: String

    /// An error about `proxy` and the tunnel to `host:port`.
    package init(_ code: Code, proxy: EgressProxy, host: String, port: Int, status: Int? = nil, detail: String) {
        self.code = code
        self.proxy = proxy.description
        self.target = EgressProxy.authority(host: host, port: port)
        self.status = status
        self.detail = detail
    }

    /// The proxy refused `CONNECT` with `status` and `reasonPhrase` (printable, bounded: see
    /// ``ProxyConnectStateMachine``): the words say what that status means for a tunnel.
    package static func refused(
        status: Int, reasonPhrase: String, proxy: EgressProxy, host: String, port: Int
    ) -> EgressProxyError {
        // The proxy's own words where it gave some (tinyproxy's 500 says "Unable to connect"); printable and short.
        let name = reasonPhrase.isEmpty ? Self.statusNames[status] ?? "no reason given" : reasonPhrase
        let said = "\(status) \(name)"
        let target = EgressProxy.authority(host: host, port: port)
        let detail: String
        switch status {
        // 407 is what RFC 9110 has a proxy answer; tinyproxy answers wrong credentials with 401.
        case 401 where proxy.credentials != nil, 407 where proxy.credentials != nil:
            detail = "the proxy refused the credentials (\(said))"
        case 401, 407:
            detail = "the proxy asks for credentials (\(said)); give them as http://user:password@host:port"
        case 403, 405:
            detail = "the proxy refused the tunnel to \(target) (\(said)); its rules must allow CONNECT to port \(port)"
        case 502, 503, 504:
            detail = "the proxy could not reach \(target) (\(said))"
        default:
            detail = "the proxy refused CONNECT to \(target) (\(said))"
        }
        return EgressProxyError(.refused, proxy: proxy, host: host, port: port, status: status, detail: detail)
    }

    private static let statusNames = [
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
        407: "Proxy Authentication Required", 408: "Request Timeout", 429: "Too Many Requests",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
        504: "Gateway Timeout",
    ]

    /// `through the proxy http://proxy:3128 to api.push.apple.com:443: the proxy refused the credentials (407 …)`.
    package var description: String {
        "through the proxy \(self.proxy) to \(self.target): \(self.detail)"
    }
}
