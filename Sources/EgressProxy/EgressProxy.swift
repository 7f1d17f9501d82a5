import Foundation

/// An HTTP proxy that APNs connections go through: `CONNECT host:port` opens a tunnel, and TLS to APNs runs inside
/// it (docs/configuration.md, "`apns.proxy`").
///
/// Its text (``description``) never shows the credentials, so it may go into logs, errors and `doctor`'s lines.
package struct EgressProxy: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The proxy's host name or IP address (an IPv6 address without brackets).
    package var host: String
    /// The proxy's TCP port.
    package var port: Int
    /// The user and password sent as `Proxy-Authorization: Basic …`; `nil` sends none.
    package var credentials: ProxyCredentials?

    /// A proxy at `host:port`.
    package init(host: String, port: Int, credentials: ProxyCredentials? = nil) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// `http://host:port`, or `http://****@host:port` when it has credentials: which proxy, never its secrets.
    package var description: String {
        "http://\(self.credentials == nil ? "" : "****@")\(Self.authority(host: self.host, port: self.port))"
    }

    /// The same as ``description``.
    package var debugDescription: String { self.description }

    /// `host:port`, with an IPv6 address in brackets: the form of `CONNECT`'s target and of `Host`.
    package static func authority(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// The user and password of a proxy. Never printed: ``description`` is `<redacted>`.
package struct ProxyCredentials: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The user name (percent-decoded).
    package var username: String
    /// The password (percent-decoded; may be empty).
    package var password: String

    /// Credentials.
    package init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    /// The value of `Proxy-Authorization`: `Basic base64(user:password)` (RFC 7617).
    package var basicAuthorization: String {
        "Basic " + Data("\(self.username):\(self.password)".utf8).base64EncodedString()
    }

    /// Always `<redacted>`.
    package var description: String { "<redacted>" }
    /// Always `<redacted>`.
    package var debugDescription: String { "<redacted>" }
}

/// Why a proxy URL cannot be used. Its text never quotes the URL (it may hold a password); it says what is wrong
/// and how to write it.
package struct ProxyURLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, e.g. `has no port`.
    package var problem: String
    /// How to write it instead.
    package var fix: String

    /// An error.
    package init(problem: String, fix: String = ProxyURLError.form) {
        self.problem = problem
        self.fix = fix
    }

    /// The form a proxy URL takes.
    package static let form =
        "write http://host:port or http://user:password@host:port (e.g. http://proxy.internal:3128)"

    package var description: String { "\(self.problem) (\(self.fix))" }
}

extension EgressProxy {
    /// Parses `http://[user[:password]@]host:port[/]`. The user and password are percent-decoded (write `%40` for
    /// `@`, `%3A` for `:`). With `schemeOptional`, `host:port` without a scheme means `http://host:port`, as curl
    /// and Go read `HTTPS_PROXY`.
    ///
    /// The port is required: proxies listen on ports of their own (3128, 8080, 8888), and a guessed one only turns a
    /// typo into a timeout.
    package init(url text: String, schemeOptional: Bool = false) throws(ProxyURLError) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        if let separator = rest.range(of: "://") {
            let scheme = rest[..<separator.lowerBound].lowercased()
            guard scheme == "http" else {
                let why =
                    scheme == "https"
                    ? "is an https:// proxy; PushBridge speaks to the proxy in plain HTTP (TLS runs to APNs inside the "
                        + "tunnel)"
                    : "has the scheme \(Self.visible(scheme)), not http"
                throw ProxyURLError(problem: why)
            }
            rest = rest[separator.upperBound...]
        } else if !schemeOptional {
            throw ProxyURLError(problem: "has no scheme")
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw ProxyURLError(problem: "has a path or query; a proxy URL is only scheme, credentials, host and port")
        }
        var credentials: ProxyCredentials?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? userInfo
            let password = userInfo.firstIndex(of: ":").map { userInfo[userInfo.index(after: $0)...] } ?? ""
            guard !user.isEmpty, let username = String(user).removingPercentEncoding,
                let secret = String(password).removingPercentEncoding
            else {
                throw ProxyURLError(
                    problem: "has credentials without a user name, or with a malformed % escape",
                    fix: "write http://user:password@host:port, with @ as %40 and : as %3A inside them")
            }
            credentials = ProxyCredentials(username: username, password: secret)
        }
        let host: Substring
        let portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw ProxyURLError(problem: "has an IPv6 address without its closing ]")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            portText = after.hasPrefix(":") ? after.dropFirst() : (after.isEmpty ? nil : after)
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
            portText = nil
        }
        guard !host.isEmpty else {
            throw ProxyURLError(problem: "has no host")
        }
        guard host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "@" && !$0.isNewline }) else {
            throw ProxyURLError(problem: "has a host with spaces or characters other than ASCII")
        }
        guard let portText, !portText.isEmpty else {
            throw ProxyURLError(problem: "has no port", fix: "add the proxy's port, e.g. http://proxy.internal:3128")
        }
        guard portText.allSatisfy(\.isASCIIDigit), let port = Int(portText), (1...65_535).contains(port) else {
            throw ProxyURLError(problem: "has a port that is not a number from 1 to 65535")
        }
        self.init(host: String(host), port: port, credentials: credentials)
    }

    /// A scheme as it may be shown: letters, digits, `+`, `-` and `.` only, at most 16 characters.
    private static func visible(_ scheme: String) -> String {
        let kept = scheme.prefix(16).filter { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        return kept.isEmpty ? "(none)" : "\"\(kept)\""
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self.isASCII && self.isNumber }
}
