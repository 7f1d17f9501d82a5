import SafeText

/// The `CONNECT` handshake with an HTTP proxy, as a value without I/O: the request to write, then the proxy's answer
/// read from pieces of any size, bounded in bytes whatever the proxy sends (RFC 9110 §9.3.6).
///
/// ```
/// CONNECT api.push.apple.com:443 HTTP/1.1
/// Host: api.push.apple.com:443
/// Proxy-Authorization: Basic dXNlcjpwYXNz      (with credentials)
///
/// HTTP/1.1 200 Connection established         <- any 2xx: the tunnel is open, TLS to APNs starts
/// ```
package struct ProxyConnectStateMachine: Sendable {
    /// The longest status line read: real ones are under 50 bytes.
    package static let maxStatusLineBytes = 1024
    /// The most bytes of answer read before its end (status line, headers, and any 1xx answers before it).
    /// Proxies send a few hundred; nginx and squid refuse requests with headers beyond 8 KiB and 64 KiB.
    package static let maxAnswerBytes = 16 * 1024

    /// What the caller does next.
    package enum Action: Sendable, Hashable {
        /// Read more.
        case readMore
        /// The tunnel is open (a 2xx): TLS starts; `leftover` is what the proxy sent after its answer (the start of
        /// the tunnel's bytes), to be handed on.
        case established(leftover: [UInt8])
        /// The proxy refused, or its answer is not usable: close the connection and fail with `failure`.
        case fail(Failure)
    }

    /// Why the tunnel did not open.
    package enum Failure: Sendable, Hashable {
        /// The proxy answered a status other than 2xx (the reason phrase the proxy gave, made printable).
        case refused(status: Int, reasonPhrase: String)
        /// The answer is not HTTP (an excerpt, made printable), or goes past a bound (which).
        case malformed(String)
    }

    /// The answer being read (the current one, after any 1xx before it).
    private var buffer: [UInt8] = []
    /// Where the current line starts in `buffer`.
    private var lineStart = 0
    /// Bytes of the 1xx answers read before the current one.
    private var earlierAnswerBytes = 0
    /// The status of the answer being read, once its status line was read.
    private var status: (code: Int, phrase: String)?
    private var finished = false

    /// A handshake not yet started.
    package init() {}

    /// The request: `CONNECT authority HTTP/1.1`, `Host`, and `Proxy-Authorization` with credentials.
    package static func request(host: String, port: Int, credentials: ProxyCredentials?) -> [UInt8] {
        let authority = EgressProxy.authority(host: host, port: port)
        var text = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let credentials {
            text += "Proxy-Authorization: \(credentials.basicAuthorization)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Bytes of the answer arrived. Nothing past the bounds is kept, however much arrives at once.
    package mutating func received<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Action {
        guard !self.finished else { return .readMore }
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            bytes.formIndex(after: &index)
            guard self.earlierAnswerBytes + self.buffer.count < Self.maxAnswerBytes else {
                return self.fail(.malformed("an answer longer than \(Self.maxAnswerBytes) bytes without its end"))
            }
            self.buffer.append(byte)
            guard byte == UInt8(ascii: "\n") else {
                if self.status == nil, self.buffer.count - self.lineStart > Self.maxStatusLineBytes + 1 {
                    return self.fail(.malformed("a status line longer than \(Self.maxStatusLineBytes) bytes"))
                }
                continue
            }
            var line = self.buffer[self.lineStart..<(self.buffer.count - 1)]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            self.lineStart = self.buffer.count
            guard let status = self.status else {
                if line.isEmpty { continue }  // empty lines before the status line are tolerated
                switch Self.parseStatus(Array(line)) {
                case .failure(let error):
                    return self.fail(.malformed("an answer that is not HTTP: \(error.excerpt)"))
                case .success(let status):
                    self.status = status
                }
                continue
            }
            guard line.isEmpty else { continue }  // a header: none matters for CONNECT
            // The end of an answer.
            self.earlierAnswerBytes += self.buffer.count
            self.buffer.removeAll(keepingCapacity: true)
            self.lineStart = 0
            self.status = nil
            if (100..<200).contains(status.code) { continue }  // an interim answer; the final one follows
            guard (200..<300).contains(status.code) else {
                return self.fail(.refused(status: status.code, reasonPhrase: status.phrase))
            }
            self.finished = true
            self.buffer = []
            return .established(leftover: Array(bytes[index...]))
        }
        return .readMore
    }

    private mutating func fail(_ failure: Failure) -> Action {
        self.finished = true
        self.buffer = []
        return .fail(failure)
    }

    /// `HTTP/1.x NNN [phrase]` → the status and the phrase; otherwise a printable excerpt of the line.
    private static func parseStatus(_ line: [UInt8]) -> Result<(code: Int, phrase: String), ExcerptError> {
        let text = line.prefix(Self.maxStatusLineBytes)
        let prefix = Array("HTTP/1.".utf8)
        guard text.count >= 12, text.starts(with: prefix), text[8] == UInt8(ascii: " "),
            text[9...11].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            text.count == 12 || text[12] == UInt8(ascii: " ")
        else {
            return .failure(ExcerptError(excerpt: Self.printable(line, limit: 40, quoted: true)))
        }
        let code = text[9...11].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return .success((code, Self.printable(text.dropFirst(13), limit: 64, quoted: false)))
    }

    private struct ExcerptError: Error {
        var excerpt: String
    }

    /// At most `limit` bytes as text (SafeText's excerpt: control characters and `\` escaped, and `"` too when
    /// `quoted`, which puts it in quotes).
    package static func printable(_ bytes: some Collection<UInt8>, limit: Int, quoted: Bool) -> String {
        guard quoted else { return SafeText.excerpt(bytes: bytes, maxBytes: limit, alsoEscaping: ["\\"]) }
        return "\"" + SafeText.excerpt(bytes: bytes, maxBytes: limit, alsoEscaping: ["\\", "\""]) + "\""
    }
}
