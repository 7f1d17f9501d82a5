import EgressProxy

/// Where an ``APNSClient`` connects and how it behaves.
package struct APNSClientConfiguration: Sendable {
    /// An APNs server: host and port.
    package struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// The host name or address.
        package var host: String
        /// The TCP port.
        package var port: Int

        /// An endpoint.
        package init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }

        /// `api.push.apple.com:443`.
        package static let production = Endpoint(host: "api.push.apple.com")
        /// `api.sandbox.push.apple.com:443`.
        package static let sandbox = Endpoint(host: "api.sandbox.push.apple.com")

        /// Parses `https://host[:port]` or `host[:port]`; `nil` when it is neither.
        package init?(url: String) {
            var rest = Substring(url)
            if rest.hasPrefix("https://") { rest = rest.dropFirst("https://".count) }
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.isEmpty, !rest.contains("/") else { return nil }
            if let colon = rest.lastIndex(of: ":") {
                guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port),
                    colon != rest.startIndex
                else { return nil }
                self.init(host: String(rest[..<colon]), port: port)
            } else {
                self.init(host: String(rest))
            }
        }

        /// `host:port`.
        package var description: String { "\(self.host):\(self.port)" }
    }

    /// The server.
    package var endpoint: Endpoint
    /// The HTTP proxy whose `CONNECT` tunnel every connection goes through; `nil` connects directly.
    package var proxy: EgressProxy?
    /// How the client authenticates.
    package var authentication: APNSAuthentication
    /// How many HTTP/2 connections the pool keeps open.
    package var connectionCount: Int
    /// A local cap on concurrent streams per connection (the server's SETTINGS may lower it further).
    package var maxConcurrentStreamsPerConnection: Int
    /// How long one attempt of a request may take, waiting for a stream included.
    package var requestTimeout: Duration
    /// How long connecting (TCP, the proxy's answer, TLS, first SETTINGS) may take.
    package var connectTimeout: Duration
    /// How many times a request lost with its connection (which the server may have processed) is sent again.
    /// Requests the server refused unprocessed (above a GOAWAY's last stream) are always sent again.
    package var maxResends: Int
    /// First delay before reconnecting a slot whose connection attempt failed; doubles per failure, with jitter.
    package var reconnectInitialDelay: Duration
    /// The longest delay between reconnection attempts.
    package var reconnectMaximumDelay: Duration
    /// A PEM file of extra CA certificates to trust (the simulator's, a private CA).
    package var additionalTrustRootsPEMFile: String?
    /// Whether the system's roots are trusted as well.
    package var trustSystemRoots: Bool
    /// Whether notifications are checked against Apple's rules before sending (see ``NotificationValidation``).
    package var validatesLocally: Bool

    /// A configuration with production-minded defaults: 2 connections, 30 s request timeout, 10 s connect
    /// timeout, 3 resends, reconnect delays from 100 ms to 30 s.
    package init(
        endpoint: Endpoint,
        proxy: EgressProxy? = nil,
        authentication: APNSAuthentication,
        connectionCount: Int = 2,
        maxConcurrentStreamsPerConnection: Int = 1000,
        requestTimeout: Duration = .seconds(30),
        connectTimeout: Duration = .seconds(10),
        maxResends: Int = 3,
        reconnectInitialDelay: Duration = .milliseconds(100),
        reconnectMaximumDelay: Duration = .seconds(30),
        additionalTrustRootsPEMFile: String? = nil,
        trustSystemRoots: Bool = true,
        validatesLocally: Bool = true
    ) {
        self.endpoint = endpoint
        self.proxy = proxy
        self.authentication = authentication
        self.connectionCount = max(1, connectionCount)
        self.maxConcurrentStreamsPerConnection = maxConcurrentStreamsPerConnection
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.maxResends = maxResends
        self.reconnectInitialDelay = reconnectInitialDelay
        self.reconnectMaximumDelay = reconnectMaximumDelay
        self.additionalTrustRootsPEMFile = additionalTrustRootsPEMFile
        self.trustSystemRoots = trustSystemRoots
        self.validatesLocally = validatesLocally
    }
}
