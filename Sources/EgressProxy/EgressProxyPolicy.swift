/// Which proxy, if any, one app's APNs connections go through: the configuration's `proxy`, the environment's
/// `HTTPS_PROXY` (with `NO_PROXY`), or none (docs/configuration.md, "`apns.proxy`").
package enum EgressProxyPolicy: Sendable, Hashable, CustomStringConvertible {
    /// No proxy: `proxy: none`, or no `proxy` key and no proxy in the environment.
    case direct
    /// `proxy: URL` (or `proxy_file`): every connection of the app goes through it, whatever the host.
    case configured(EgressProxy)
    /// `HTTPS_PROXY` or `https_proxy` (`variable`): every host but those `bypass` (`NO_PROXY`) names and loopback
    /// ones.
    case environment(EgressProxy, variable: String, bypass: NoProxyList)

    /// The proxy a connection to `host` goes through; `nil` for a direct connection.
    package func proxy(forHost host: String) -> EgressProxy? {
        switch self {
        case .direct:
            return nil
        case .configured(let proxy):
            return proxy
        case .environment(let proxy, _, let bypass):
            // As in Go's net/http: a simulator or gateway on this host is never behind the egress proxy, and a
            // test suite run where HTTPS_PROXY is set keeps working. `proxy:` in the configuration still applies.
            return NoProxyList.isLoopback(host) || bypass.matches(host) ? nil : proxy
        }
    }

    /// Where the proxy comes from and which it is, for people: `none`, `http://proxy:3128 (apns.proxy)`, or
    /// `http://proxy:3128 (HTTPS_PROXY, NO_PROXY: 2 entries)`. Never the credentials.
    package var description: String {
        switch self {
        case .direct: "none"
        case .configured(let proxy): "\(proxy)"
        case .environment(let proxy, let variable, let bypass):
            "\(proxy) (from \(variable)\(bypass.entries.isEmpty ? "" : ", except NO_PROXY's \(bypass.entries.count) entries"))"
        }
    }

    /// The environment's proxy for TLS connections: `https_proxy`, else `HTTPS_PROXY` (the lower-case one first, as
    /// curl, wget and Python read them), with `no_proxy`, else `NO_PROXY`; an empty value counts as unset.
    /// `HTTP_PROXY` and `ALL_PROXY` are not read: every APNs connection is TLS. A value without a scheme means
    /// `http://`.
    ///
    /// Throws naming the variable (never its value, which may hold a password) when it is not a proxy URL.
    package static func fromEnvironment(
        _ environment: [String: String]
    ) throws(EnvironmentProxyError) -> EgressProxyPolicy {
        guard let (variable, value) = Self.firstSet(["https_proxy", "HTTPS_PROXY"], in: environment) else {
            return .direct
        }
        let proxy: EgressProxy
        do {
            proxy = try EgressProxy(url: value, schemeOptional: true)
        } catch {
            throw EnvironmentProxyError(variable: variable, error: error)
        }
        let bypass = Self.firstSet(["no_proxy", "NO_PROXY"], in: environment).map { NoProxyList($0.value) }
        return .environment(proxy, variable: variable, bypass: bypass ?? NoProxyList(""))
    }

    private static func firstSet(
        _ names: [String], in environment: [String: String]
    ) -> (name: String, value: String)? {
        for name in names {
            if let value = environment[name], !value.trimmingWhitespace().isEmpty { return (name, value) }
        }
        return nil
    }
}

/// `HTTPS_PROXY` (or `https_proxy`) is set, and not to a usable proxy URL.
package struct EnvironmentProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The variable's name.
    package var variable: String
    /// What is wrong with its value.
    package var error: ProxyURLError

    /// An error.
    package init(variable: String, error: ProxyURLError) {
        self.variable = variable
        self.error = error
    }

    /// `the environment variable HTTPS_PROXY has no port (its value is not shown: …)`.
    package var description: String {
        "the environment variable \(self.variable) \(self.error.problem) (its value is not shown: it may hold a "
            + "password)"
    }
}

/// `NO_PROXY`: the hosts an environment proxy is not used for. Entries are separated by commas or spaces:
/// - `*` matches every host;
/// - a domain (`example.com`, `.example.com` or `*.example.com`) matches it and every name below it;
/// - an IP address matches itself, and an IPv4 CIDR block (`10.0.0.0/8`) every address in it;
/// - `host:port` matches the host on any port (APNs hosts are known by name, and so are they here).
///
/// Matching compares names as written, case-insensitively: no name is resolved.
package struct NoProxyList: Sendable, Hashable {
    /// The entries as given (lower-cased, trimmed; empty ones dropped).
    package var entries: [String]

    /// Parses a `NO_PROXY` value.
    package init(_ text: String) {
        self.entries = text.lowercased()
            .split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
            .map { String($0).trimmingWhitespace() }
            .filter { !$0.isEmpty }
    }

    /// Whether a connection to `host` (a name, or an IP address without brackets) bypasses the proxy.
    package func matches(_ host: String) -> Bool {
        let host = Self.bare(host.lowercased())
        for entry in self.entries {
            if entry == "*" { return true }
            var pattern = Self.bare(Self.withoutPort(entry))
            if let slash = pattern.firstIndex(of: "/") {
                if let block = IPv4Block(pattern[..<slash], bits: pattern[pattern.index(after: slash)...]),
                    let address = IPv4Block.address(host), block.contains(address)
                {
                    return true
                }
                continue
            }
            if pattern.hasPrefix("*.") {
                pattern.removeFirst(2)
            } else if pattern.hasPrefix(".") {
                pattern.removeFirst()
            }
            if pattern.isEmpty { continue }
            if host == pattern || host.hasSuffix("." + pattern) { return true }
        }
        return false
    }

    /// Whether `host` is this machine: `localhost` (and names below it), `127.0.0.0/8` or `::1`.
    package static func isLoopback(_ host: String) -> Bool {
        let host = Self.bare(host.lowercased())
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" || host == "0:0:0:0:0:0:0:1" {
            return true
        }
        return IPv4Block.address(host).map { $0 >> 24 == 127 } ?? false
    }

    private static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// `host:port` → `host`; an IPv6 address (more than one colon, or bracketed) stays whole.
    private static func withoutPort(_ entry: String) -> String {
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            return String(entry[...close])
        }
        guard entry.filter({ $0 == ":" }).count == 1, let colon = entry.firstIndex(of: ":") else { return entry }
        return String(entry[..<colon])
    }
}

/// An IPv4 CIDR block.
private struct IPv4Block {
    var network: UInt32
    var mask: UInt32

    init?(_ address: Substring, bits: Substring) {
        guard let network = Self.address(String(address)), let count = Int(bits), (0...32).contains(count) else {
            return nil
        }
        self.mask = count == 0 ? 0 : UInt32.max << (32 - count)
        self.network = network & self.mask
    }

    func contains(_ address: UInt32) -> Bool { address & self.mask == self.network }

    /// A dotted-quad IPv4 address as a number; `nil` for anything else (a name, IPv6).
    static func address(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let byte = UInt32(part), byte <= 255
            else { return nil }
            value = value << 8 | byte
        }
        return value
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        String(self.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
