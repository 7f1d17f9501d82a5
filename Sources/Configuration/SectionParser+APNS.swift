import BinaryProvider
import Foundation
import Routing
import Yams

// The `apns` block and `apps`.

extension SectionParser {
    func apns(_ value: ConfigValue) -> APNSSettings? {
        guard let mapping = value.mapping(known: Self.apnsKeys) else {
            return nil
        }
        let environment = mapping["environment"].map { $0.oneOf(APNSSettings.Environment.self) } ?? .production
        let providerProtocol = mapping["protocol"].map { $0.oneOf(APNSSettings.ProviderProtocol.self) } ?? .http2
        // The binary protocol's endpoint is its gateway, `host:port` (a TLS connection, not a URL).
        let endpoint =
            providerProtocol == .binary
            ? mapping["endpoint"].flatMap { self.hostAndPort($0, example: "gateway.push.apple.com:2195") }
            : mapping["endpoint"].flatMap(self.endpoint)
        let caFile = mapping["ca_file"].flatMap { value in
            value.optionalString().map { self.credentialFile($0, at: value, kind: .certificates) }
        }
        let auth = mapping.required("auth", hint: "type: token with key_file, key_id, team_id").flatMap(self.auth)
        let connections = mapping["connections"].map { $0.integer(in: 1...64) } ?? 2
        let streams = mapping["max_concurrent_streams"].map { $0.integer(in: 1...100_000) } ?? 1000
        let timeout =
            mapping["request_timeout"].map {
                $0.duration(minimum: .milliseconds(1), maximum: Bounds.requestTimeout)
            } ?? .seconds(10)
        let retry = self.retry(mapping["retry"])
        var binary: BinaryProtocolSettings? = BinaryProtocolSettings()
        if providerProtocol == .binary {
            binary = mapping["binary"].map(self.binary) ?? BinaryProtocolSettings()
            if mapping["endpoint"] != nil {
                guard let endpoint else { return nil }
                binary?.gateway = endpoint
            }
            if let value = mapping["auth"], case .token = auth {
                value.report(
                    .invalidValue, "the binary protocol takes certificate authentication only",
                    hint: "type: certificate with p12_file (or cert_file and key_file), or protocol: http2")
                return nil
            }
        } else if let value = mapping["binary"] {
            value.report(.unknownKey, "binary applies only with protocol: binary", hint: "add protocol: binary")
            return nil
        }
        var broadcast: BroadcastSettings? = BroadcastSettings()
        if let value = mapping["broadcast"] {
            if providerProtocol == .binary {
                value.report(
                    .invalidValue, "broadcast channels are an HTTP/2 API; the binary protocol has none",
                    hint: "remove broadcast, or use protocol: http2")
                return nil
            }
            broadcast = self.broadcast(value)
        }
        let proxy = self.proxy(in: mapping)
        guard let environment, let auth, let connections, let streams, let timeout, let retry, let providerProtocol,
            let binary, let broadcast, let proxy
        else {
            return nil
        }
        var settings = APNSSettings(
            environment: environment, endpoint: endpoint, caFile: caFile, auth: auth,
            connections: connections, maxConcurrentStreams: streams, requestTimeout: timeout, retry: retry
        )
        settings.providerProtocol = providerProtocol
        settings.binary = binary
        settings.broadcast = broadcast
        settings.proxy = proxy
        return settings
    }

    /// `broadcast:` of an HTTP/2 app.
    func broadcast(_ value: ConfigValue) -> BroadcastSettings? {
        guard let mapping = value.mapping(known: Self.broadcastKeys) else {
            return nil
        }
        var settings = BroadcastSettings()
        if let endpoint = mapping["management_endpoint"] {
            guard let parsed = self.managementEndpoint(endpoint) else { return nil }
            settings.managementEndpoint = parsed
        }
        return settings
    }

    /// `broadcast.management_endpoint`: `host:port` or `https://host[:port]`; empty means Apple's.
    func managementEndpoint(_ value: ConfigValue) -> APNSSettings.Endpoint?? {
        guard let text = value.optionalString()?.trimmingWhitespace() else {
            return .some(nil)
        }
        if !text.contains("://"), let endpoint = APNSSettings.Endpoint(hostAndPort: text) {
            return endpoint
        }
        if text.lowercased().hasPrefix("https://"), let components = URLComponents(string: text),
            let host = components.host, !host.isEmpty, components.path.isEmpty || components.path == "/",
            components.query == nil, (1...65_535).contains(components.port ?? 443)
        {
            return APNSSettings.Endpoint(host: host, port: components.port ?? 443)
        }
        value.report(
            .invalidValue, "\(value.describe(text)) is not host:port or https://host[:port]",
            hint: "write host:port, e.g. api-manage-broadcast.sandbox.push.apple.com:2195 or 127.0.0.1:2197 "
                + "(the simulator), or leave it out for Apple's host of the environment")
        return nil
    }

    /// `binary:` of an app with `protocol: binary`.
    func binary(_ value: ConfigValue) -> BinaryProtocolSettings? {
        guard let mapping = value.mapping(known: Self.binaryKeys) else {
            return nil
        }
        var settings = BinaryProtocolSettings()
        var valid = true
        if let gateway = mapping["gateway"] {
            gateway.report(
                .invalidValue, "the gateway is the app's endpoint",
                hint: "write endpoint: host:port next to protocol: binary, e.g. endpoint: gateway.push.apple.com:2195")
            valid = false
        }
        if let feedback = mapping["feedback"] {
            if let parsed = self.feedback(feedback) { settings.feedback = parsed } else { valid = false }
        }
        if let format = mapping["format"] {
            if let parsed = format.oneOf(BinaryFormat.self) { settings.format = parsed } else { valid = false }
        }
        if let limit = mapping["payload_limit"] {
            // The default is the format's (2048 framed, 256 enhanced and simple); nothing in the protocol allows
            // more than 2048 in one notification.
            if let bytes = limit.byteSize(in: 1...BinaryFrame.framedPayloadLimitBytes) {
                settings.payloadLimit = bytes
            } else {
                valid = false
            }
        }
        if let window = mapping["quiet_window"] {
            if let duration = window.duration(minimum: .milliseconds(10), maximum: Bounds.requestTimeout) {
                settings.quietWindow = duration
            } else {
                valid = false
            }
        }
        if let count = mapping["max_unconfirmed"] {
            if let number = count.integer(in: 1...1_000_000) { settings.maxUnconfirmed = number } else { valid = false }
        }
        if let count = mapping["max_resends_without_error"] {
            if let number = count.integer(in: 0...100) {
                settings.maxResendsWithoutError = number
            } else {
                valid = false
            }
        }
        return valid ? settings : nil
    }

    /// `binary.feedback`: the feedback service poller.
    func feedback(_ value: ConfigValue) -> FeedbackSettings? {
        guard let mapping = value.mapping(known: Self.feedbackKeys) else {
            return nil
        }
        var settings = FeedbackSettings()
        var valid = true
        if let enabled = mapping["enabled"] {
            if let flag = enabled.boolean() { settings.enabled = flag } else { valid = false }
        }
        if let endpoint = mapping["endpoint"] {
            if let parsed = self.hostAndPort(endpoint, example: "feedback.push.apple.com:2196") {
                settings.endpoint = parsed
            } else {
                valid = false
            }
        }
        if let interval = mapping["interval"] {
            // At least a second: every poll is a TLS handshake, and Apple asked for one a day.
            if let duration = interval.duration(minimum: .seconds(1), maximum: Bounds.feedbackInterval) {
                settings.interval = duration
            } else {
                valid = false
            }
        }
        if let timeout = mapping["timeout"] {
            if let duration = timeout.duration(minimum: .seconds(1), maximum: Bounds.requestTimeout) {
                settings.timeout = duration
            } else {
                valid = false
            }
        }
        if let topic = mapping["topic"] {
            if let text = topic.nonEmptyString()?.trimmingWhitespace() { settings.topic = text } else { valid = false }
        }
        return valid ? settings : nil
    }

    /// `endpoint` of a binary app (its gateway), `binary.feedback.endpoint`: `host:port` (a TLS connection, not a
    /// URL).
    func hostAndPort(_ value: ConfigValue, example: String) -> APNSSettings.Endpoint? {
        guard let text = value.optionalString()?.trimmingWhitespace() else {
            return nil
        }
        guard let endpoint = APNSSettings.Endpoint(hostAndPort: text) else {
            value.report(
                .invalidValue, "\(value.describe(text)) is not host:port with a port 1-65535",
                hint: "write host:port, e.g. \(example) or 127.0.0.1:\(example.split(separator: ":").last ?? "")")
            return nil
        }
        return endpoint
    }

    /// `endpoint`: `https://host[:port]`; empty means none.
    func endpoint(_ value: ConfigValue) -> APNSSettings.Endpoint? {
        guard let text = value.optionalString()?.trimmingWhitespace() else {
            return nil
        }
        guard let components = URLComponents(string: text), components.scheme?.lowercased() == "https",
            let host = components.host, !host.isEmpty, components.path.isEmpty || components.path == "/",
            components.query == nil
        else {
            value.report(
                .invalidValue, "\(value.describe(text)) is not an https endpoint",
                hint: "write https://host or https://host:port, e.g. https://127.0.0.1:2197"
            )
            return nil
        }
        let port = components.port ?? 443
        guard (1...65_535).contains(port) else {
            value.report(.invalidValue, "port \(port) is out of range")
            return nil
        }
        return APNSSettings.Endpoint(host: host, port: port)
    }

    func auth(_ value: ConfigValue) -> APNSAuth? {
        guard let mapping = value.mapping(known: Self.authKeys) else {
            return nil
        }
        enum Kind: String, CaseIterable {
            case token, certificate
        }
        let kind: Kind?
        if let type = mapping["type"] {
            kind = type.oneOf(Kind.self)
        } else if mapping.contains("key_id") || mapping.contains("team_id") {
            kind = .token
        } else if mapping.contains("p12_file") || mapping.contains("cert_file") {
            kind = .certificate
        } else {
            _ = mapping.required("type", hint: "token (key_file, key_id, team_id) or certificate (p12_file)")
            kind = nil
        }
        switch kind {
        case nil:
            return nil
        case .token:
            self.rejectKeys(["p12_file", "p12_password", "p12_password_file", "cert_file"], in: mapping, for: "token")
            let keyFile = mapping.required("key_file", hint: "the .p8 key from your Apple developer account")
                .flatMap { value in value.nonEmptyString().map { self.credentialFile($0, at: value, kind: .p8) } }
            let keyID = mapping.required("key_id", hint: "the 10-character Key ID of the .p8 key")
                .flatMap { self.identifier($0) }
            let teamID = mapping.required("team_id", hint: "your 10-character Apple Team ID")
                .flatMap { self.identifier($0) }
            guard let keyFile, let keyID, let teamID else {
                return nil
            }
            return .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
        case .certificate:
            self.rejectKeys(["key_id", "team_id"], in: mapping, for: "certificate")
            if mapping.contains("p12_file") {
                if mapping.contains("cert_file") {
                    mapping["cert_file"]?.report(.invalidValue, "give either p12_file or cert_file + key_file")
                }
                let file = mapping.required("p12_file").flatMap { value in
                    value.nonEmptyString().map { self.credentialFile($0, at: value, kind: .pkcs12) }
                }
                let password = self.secret(named: "p12_password", in: mapping)
                guard let file else {
                    return nil
                }
                return .pkcs12(file: file, password: password)
            }
            if mapping.contains("cert_file") {
                self.rejectKeys(["p12_password", "p12_password_file"], in: mapping, for: "cert_file")
                let certificate = mapping.required("cert_file").flatMap { value in
                    value.nonEmptyString().map { self.credentialFile($0, at: value, kind: .certificates) }
                }
                let key = mapping.required("key_file", hint: "the PEM private key of cert_file").flatMap { value in
                    value.nonEmptyString().map { self.credentialFile($0, at: value, kind: .pemKey) }
                }
                guard let certificate, let key else {
                    return nil
                }
                return .pem(certificateFile: certificate, keyFile: key)
            }
            _ = mapping.required("p12_file", hint: "or cert_file + key_file (PEM)")
            return nil
        }
    }

    /// Reports every key of `keys` present in `mapping` as not belonging to `kind`.
    func rejectKeys(_ keys: [String], in mapping: ConfigMapping, for kind: String) {
        for entry in mapping.entries where keys.contains(entry.key) {
            entry.value.reader.report(
                .unknownKey, at: entry.value.path, line: entry.keyLine, "does not apply to \(kind) auth"
            )
        }
    }

    /// A Key ID or Team ID: 10 ASCII letters or digits.
    func identifier(_ value: ConfigValue) -> String? {
        guard let text = value.nonEmptyString()?.trimmingWhitespace() else {
            return nil
        }
        guard text.count == 10, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            value.report(.invalidValue, "\(value.describe(text)) is not a 10-character Apple identifier")
            return nil
        }
        return text
    }

    func retry(_ value: ConfigValue?) -> RetrySettings? {
        let mapping = value?.mapping(known: Self.retryKeys)
        if value != nil && mapping == nil {
            return nil
        }
        let attempts = mapping?["max_attempts"].map { $0.integer(in: 1...1000) } ?? 5
        let initial =
            mapping?["initial_backoff"].map {
                $0.duration(minimum: .milliseconds(1), maximum: Bounds.backoff)
            } ?? .seconds(1)
        let maximum =
            mapping?["max_backoff"].map {
                $0.duration(minimum: .milliseconds(1), maximum: Bounds.backoff)
            } ?? .seconds(300)
        guard let attempts, let initial, let maximum else {
            return nil
        }
        if maximum < initial {
            let path = mapping?["max_backoff"]?.path ?? mapping?.owner.path ?? "retry"
            self.reader.report(
                .invalidValue, at: path, line: mapping?["max_backoff"]?.line ?? mapping?.owner.line,
                "must not be shorter than initial_backoff (\(ConfigValue.format(initial)))"
            )
            return nil
        }
        return RetrySettings(maxAttempts: attempts, initialBackoff: initial, maxBackoff: maximum)
    }

    func apps(_ value: ConfigValue) -> [String: APNSSettings]? {
        guard let mapping = value.mapping(known: nil) else {
            return nil
        }
        var apps: [String: APNSSettings] = [:]
        var valid = true
        for entry in mapping.entries {
            guard !entry.value.isNull else {
                entry.value.report(.wrongType, "expected a mapping with the same keys as apns, found null")
                valid = false
                continue
            }
            if let settings = self.apns(entry.value) {
                apps[entry.key] = settings
            } else {
                valid = false
            }
        }
        return valid ? apps : nil
    }
}
