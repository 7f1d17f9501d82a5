import BinaryProvider
import Crypto
import Foundation
import Yams

/// What the simulator does: which apps and keys it knows, which tokens are dead, which faults it injects and
/// how its connections misbehave. Read from a YAML scenario file (docs/simulator.md) or built in code.
package struct SimulatorScenario: Sendable {
    /// A provider-token key the simulator accepts.
    ///
    /// `@unchecked Sendable`: swift-crypto's P-256 keys are not `Sendable` on Linux because they wrap a
    /// BoringSSL key object. That object is never mutated after creation and BoringSSL verifies with one key
    /// from several threads safely; every other field is a `let`-like value.
    package struct JWTKey: @unchecked Sendable {
        /// The key ID (`kid`).
        package var keyID: String
        /// The team the key belongs to (`iss`); `nil` accepts any team.
        package var teamID: String?
        /// The package key that verifies the token's signature.
        package var publicKey: P256.Signing.PublicKey

        /// Creates a key.
        package init(keyID: String, teamID: String?, publicKey: P256.Signing.PublicKey) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
        }
    }

    /// A change of a connection's `SETTINGS_MAX_CONCURRENT_STREAMS` once it has received some streams.
    package struct StreamLimitStep: Sendable, Hashable {
        /// After this many streams on the connection...
        package var afterStreams: Int
        /// ...announce this limit.
        package var maxConcurrentStreams: Int

        /// Creates a step.
        package init(afterStreams: Int, maxConcurrentStreams: Int) {
            self.afterStreams = afterStreams
            self.maxConcurrentStreams = maxConcurrentStreams
        }
    }

    /// Bundle IDs (and MDM topics) the simulator accepts; the push-type suffixes are implied.
    /// Other topics are answered `TopicDisallowed`. Empty accepts every topic.
    package var topics: Set<String> = []
    /// Keys for token-based connections.
    package var jwtKeys: [JWTKey] = []
    /// PEM file of the CA whose client certificates are accepted for certificate-based connections;
    /// `nil` turns certificate authentication off (every request then needs a provider token).
    package var clientCAFile: String?
    /// Device tokens answered `410 Unregistered`, with the timestamp (ms since the epoch) reported.
    package var unregisteredTokens: [String: Int64] = [:]
    /// Device tokens answered `400 BadDeviceToken` although well formed (wrong environment, say).
    package var badTokens: Set<String> = []
    /// Seed of the generator that picks which requests get an injected fault.
    package var seed: UInt64 = 1
    /// Share of requests answered `429 TooManyRequests`, 0...1.
    package var tooManyRequestsRate: Double = 0
    /// Share of requests answered `500 InternalServerError`, 0...1.
    package var internalServerErrorRate: Double = 0
    /// Share of requests answered `503 ServiceUnavailable`, 0...1.
    package var serviceUnavailableRate: Double = 0
    /// Delay before each answer.
    package var latency: Duration = .zero
    /// Random extra delay per answer: each answer waits ``latency`` plus a whole number of milliseconds drawn
    /// uniformly from 0 to this, from a generator seeded by ``seed`` (apart from the faults' generator, so
    /// adding jitter leaves the same requests faulty). Answers then arrive out of order, as from a loaded APNs.
    package var latencyJitter: Duration = .zero
    /// How many requests to remember in ``SimulatorEngine/receivedRequests``, in the order they were received
    /// (device token, `apns-id`, status): the first this many; later ones are counted only. 0: none.
    package var receiveLogLimit = 0
    /// The most ``receiveLogLimit`` may be: each entry holds a token and an id (about 200 bytes).
    package static let maximumReceiveLogLimit = 1_000_000
    /// The `SETTINGS_MAX_CONCURRENT_STREAMS` announced when a connection opens.
    package var maxConcurrentStreams: Int = 1000
    /// Per connection: limits announced after some streams.
    package var streamLimitSchedule: [StreamLimitStep] = []
    /// Per connection: send GOAWAY after this many streams (the later ones are refused as not processed).
    package var goawayAfterStreams: Int?
    /// Per connection: close the connection without answering when its stream number reaches this count
    /// (its unanswered requests are lost to the client, which must send them again).
    package var dropAfterStreams: Int?
    /// The largest age of a provider token's `iat` before `ExpiredProviderToken`.
    package var maximumTokenAge: Duration = .seconds(3600)
    /// The least time between two different tokens on one connection before `TooManyProviderTokenUpdates`.
    package var minimumTokenUpdateInterval: Duration = .seconds(20 * 60)

    /// A broadcast channel that exists when the simulator starts (`channels.existing`).
    package struct Channel: Sendable, Hashable {
        /// The app it belongs to.
        package var bundleID: String
        /// Its ID, as `apns-channel-id` carries it (base64).
        package var channelID: String
        /// Its message storage policy: 0 (No Message Stored) or 1 (Most Recent Message Stored).
        package var storagePolicy: Int

        /// Creates a channel.
        package init(bundleID: String, channelID: String, storagePolicy: Int = 0) {
            self.bundleID = bundleID
            self.channelID = channelID
            self.storagePolicy = storagePolicy
        }
    }

    /// Apple's channel limit per app (10 000); creating one more is answered `400 CannotCreateChannelConfig`.
    package static let appleChannelLimitPerApp = 10_000
    /// Channels one app may hold at once (`channels.limit_per_app`, default Apple's 10 000).
    package var channelLimitPerApp = SimulatorScenario.appleChannelLimitPerApp
    /// The simulator's own limit on the channels all apps hold together (100 000: ten apps at Apple's limit). Apple
    /// documents none (its limit is per app, and an account has few apps); without `topics` the simulator takes any
    /// bundle ID, so the per-app limit alone would let the channel store grow without bound. Past it a create is
    /// answered `400 CannotCreateChannelConfig`, the reason Apple gives at its channel limit.
    package static let defaultChannelLimitTotal = 100_000
    /// Channels all apps together may hold at once (default ``defaultChannelLimitTotal``; not in the scenario
    /// file: a bound on the simulator's memory, lowered by tests).
    package var channelLimitTotal = SimulatorScenario.defaultChannelLimitTotal
    /// Broadcast channels that exist from the start (`channels.existing`).
    package var channels: [Channel] = []

    /// The binary gateway's faults (`binary_gateway:`; used with `pushbridge simulator --binary-port`).
    package var binaryGateway = BinaryGatewayBehaviour()

    /// A scenario that accepts everything well formed from any topic, without keys.
    package init() {}
}

/// A scenario file that could not be used; names the file, the key path, the line where known, and the fix.
package struct ScenarioError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file.
    package var file: String
    /// The key path, e.g. `jwt_keys[0].kid`.
    package var keyPath: String
    /// The 1-based line, when known.
    package var line: Int?
    /// What is wrong and how to fix it.
    package var message: String

    /// Creates an error.
    package init(file: String, keyPath: String, line: Int?, message: String) {
        self.file = file
        self.keyPath = keyPath
        self.line = line
        self.message = message
    }

    /// `file:line: key.path: message`.
    package var description: String {
        let location = self.line.map { "\(self.file):\($0)" } ?? self.file
        return "\(location): \(self.keyPath.isEmpty ? "" : "\(self.keyPath): ")\(self.message)"
    }
}

extension SimulatorScenario {
    /// Reads a scenario file; relative paths in it are resolved against the file's directory.
    package static func load(file: String) throws(ScenarioError) -> SimulatorScenario {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw ScenarioError(file: file, keyPath: "", line: nil, message: "cannot read the scenario file")
        }
        let directory = (file as NSString).deletingLastPathComponent
        return try self.parse(yaml: text, file: file, baseDirectory: directory)
    }

    /// Parses scenario YAML; `file` is only used in errors.
    package static func parse(yaml: String, file: String, baseDirectory: String = ".") throws(ScenarioError)
        -> SimulatorScenario
    {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            throw ScenarioError(file: file, keyPath: "", line: nil, message: "not valid YAML: \(error)")
        }
        var scenario = SimulatorScenario()
        guard let root else { return scenario }
        let reader = ScenarioReader(file: file, baseDirectory: baseDirectory)
        try reader.read(root, into: &scenario)
        return scenario
    }
}

/// Walks the YAML nodes, checking every key and value with an error that says where and how to fix it.
private struct ScenarioReader {
    let file: String
    let baseDirectory: String

    func read(_ root: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let top = try self.mapping(
            root, path: "",
            allowed: [
                "topics", "jwt_keys", "certificate_auth", "tokens", "faults", "latency_ms", "latency_jitter_ms",
                "receive_log", "connections", "provider_tokens", "binary_gateway", "channels",
            ])
        if let topics = top["topics"] {
            scenario.topics = Set(try self.strings(topics.node, path: "topics"))
        }
        if let keys = top["jwt_keys"] {
            for (index, node) in try self.sequence(keys.node, path: "jwt_keys").enumerated() {
                scenario.jwtKeys.append(try self.jwtKey(node, path: "jwt_keys[\(index)]"))
            }
        }
        if let certificate = top["certificate_auth"] {
            let map = try self.mapping(certificate.node, path: "certificate_auth", allowed: ["client_ca_file"])
            if let caFile = map["client_ca_file"] {
                scenario.clientCAFile = self.resolve(
                    try self.string(caFile.node, path: "certificate_auth.client_ca_file"))
            }
        }
        if let tokens = top["tokens"] {
            try self.tokens(tokens.node, into: &scenario)
        }
        if let faults = top["faults"] {
            try self.faults(faults.node, into: &scenario)
        }
        if let latency = top["latency_ms"] {
            scenario.latency = .milliseconds(try self.integer(latency.node, path: "latency_ms", range: 0...600_000))
        }
        if let jitter = top["latency_jitter_ms"] {
            scenario.latencyJitter = .milliseconds(
                try self.integer(jitter.node, path: "latency_jitter_ms", range: 0...600_000))
        }
        if let log = top["receive_log"] {
            scenario.receiveLogLimit = try self.integer(
                log.node, path: "receive_log", range: 0...SimulatorScenario.maximumReceiveLogLimit)
        }
        if let gateway = top["binary_gateway"] {
            try self.binaryGateway(gateway.node, into: &scenario)
        }
        if let tokenRules = top["provider_tokens"] {
            let path = "provider_tokens"
            let map = try self.mapping(tokenRules.node, path: path, allowed: ["max_age_s", "min_update_interval_s"])
            if let age = map["max_age_s"] {
                scenario.maximumTokenAge = .seconds(
                    try self.integer(age.node, path: "\(path).max_age_s", range: 1...86_400)
                )
            }
            if let interval = map["min_update_interval_s"] {
                scenario.minimumTokenUpdateInterval = .seconds(
                    try self.integer(interval.node, path: "\(path).min_update_interval_s", range: 0...86_400)
                )
            }
        }
        if let connections = top["connections"] {
            try self.connections(connections.node, into: &scenario)
        }
        if let channels = top["channels"] {
            try self.channels(channels.node, into: &scenario)
        }
    }

    private func channels(_ node: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let map = try self.mapping(node, path: "channels", allowed: ["limit_per_app", "existing"])
        if let limit = map["limit_per_app"] {
            scenario.channelLimitPerApp = try self.integer(
                limit.node, path: "channels.limit_per_app", range: 0...SimulatorScenario.appleChannelLimitPerApp)
        }
        guard let existing = map["existing"] else { return }
        for (index, entry) in try self.sequence(existing.node, path: "channels.existing").enumerated() {
            let path = "channels.existing[\(index)]"
            let item = try self.mapping(entry, path: path, allowed: ["bundle_id", "channel_id", "storage_policy"])
            guard let bundle = item["bundle_id"], let id = item["channel_id"] else {
                throw self.error(entry, path, "each channel needs 'bundle_id' and 'channel_id' (base64)")
            }
            let channelID = try self.string(id.node, path: "\(path).channel_id")
            guard SimulatorChannels.isWellFormed(channelID) else {
                throw self.error(
                    id.node, "\(path).channel_id", "not base64; write an ID such as dHN0LXNyY2gtY2hubA==")
            }
            var policy = 0
            if let value = item["storage_policy"] {
                policy = try self.integer(value.node, path: "\(path).storage_policy", range: 0...1)
            }
            scenario.channels.append(
                SimulatorScenario.Channel(
                    bundleID: try self.string(bundle.node, path: "\(path).bundle_id"), channelID: channelID,
                    storagePolicy: policy))
        }
    }

    private func jwtKey(_ node: Node, path: String) throws(ScenarioError) -> SimulatorScenario.JWTKey {
        let map = try self.mapping(
            node, path: path, allowed: ["kid", "team", "public_key", "p8_file", "public_key_file"])
        guard let kid = map["kid"] else { throw self.error(node, path, "missing 'kid' (the 10-character key ID)") }
        let keyID = try self.string(kid.node, path: "\(path).kid")
        var teamID: String?
        if let team = map["team"] {
            teamID = try self.string(team.node, path: "\(path).team")
        }
        let publicKey: P256.Signing.PublicKey
        if let pem = map["public_key"] {
            let text = try self.string(pem.node, path: "\(path).public_key")
            guard let key = try? P256.Signing.PublicKey(pemRepresentation: text) else {
                throw self.error(
                    pem.node, "\(path).public_key", "not a PEM P-256 package key (-----BEGIN PUBLIC KEY-----)")
            }
            publicKey = key
        } else if let file = map["public_key_file"] ?? map["p8_file"] {
            let isPrivate = map["p8_file"] != nil
            let keyPath = "\(path).\(isPrivate ? "p8_file" : "public_key_file")"
            let filePath = self.resolve(try self.string(file.node, path: keyPath))
            guard let text = try? String(contentsOfFile: filePath, encoding: .utf8) else {
                throw self.error(file.node, keyPath, "cannot read \(filePath)")
            }
            if isPrivate, let key = try? P256.Signing.PrivateKey(pemRepresentation: text) {
                publicKey = key.publicKey
            } else if !isPrivate, let key = try? P256.Signing.PublicKey(pemRepresentation: text) {
                publicKey = key
            } else {
                throw self.error(
                    file.node, keyPath, "\(filePath) is not a PEM P-256 \(isPrivate ? "private" : "package") key")
            }
        } else {
            throw self.error(node, path, "give the key as 'public_key' (PEM), 'public_key_file' or 'p8_file'")
        }
        return SimulatorScenario.JWTKey(keyID: keyID, teamID: teamID, publicKey: publicKey)
    }

    private func tokens(_ node: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let map = try self.mapping(node, path: "tokens", allowed: ["unregistered", "bad"])
        if let unregistered = map["unregistered"] {
            for (index, entry) in try self.sequence(unregistered.node, path: "tokens.unregistered").enumerated() {
                let path = "tokens.unregistered[\(index)]"
                if entry.scalar != nil {
                    let token = try self.deviceToken(entry, path: path)
                    scenario.unregisteredTokens[token] = 0
                    continue
                }
                let item = try self.mapping(entry, path: path, allowed: ["token", "since_ms"])
                guard let token = item["token"] else { throw self.error(entry, path, "missing 'token'") }
                var since: Int64 = 0
                if let value = item["since_ms"] {
                    since = Int64(try self.integer(value.node, path: "\(path).since_ms", range: 0...Int.max))
                }
                scenario.unregisteredTokens[try self.deviceToken(token.node, path: "\(path).token")] = since
            }
        }
        if let bad = map["bad"] {
            for (index, entry) in try self.sequence(bad.node, path: "tokens.bad").enumerated() {
                scenario.badTokens.insert(try self.deviceToken(entry, path: "tokens.bad[\(index)]"))
            }
        }
    }

    private func faults(_ node: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let map = try self.mapping(node, path: "faults", allowed: ["seed", "rate_429", "rate_500", "rate_503"])
        if let seed = map["seed"] {
            scenario.seed = UInt64(try self.integer(seed.node, path: "faults.seed", range: 0...Int.max))
        }
        if let rate = map["rate_429"] {
            scenario.tooManyRequestsRate = try self.rate(rate.node, path: "faults.rate_429")
        }
        if let rate = map["rate_500"] {
            scenario.internalServerErrorRate = try self.rate(rate.node, path: "faults.rate_500")
        }
        if let rate = map["rate_503"] {
            scenario.serviceUnavailableRate = try self.rate(rate.node, path: "faults.rate_503")
        }
        let total = scenario.tooManyRequestsRate + scenario.internalServerErrorRate + scenario.serviceUnavailableRate
        if total > 1 {
            throw self.error(node, "faults", "rate_429 + rate_500 + rate_503 is \(total); their sum must be at most 1")
        }
    }

    private func binaryGateway(_ node: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let path = "binary_gateway"
        let map = try self.mapping(
            node, path: path,
            allowed: ["processing_error_at", "shutdown_after", "drop_after", "payload_limit", "feedback_tokens"])
        var behaviour = scenario.binaryGateway
        if let at = map["processing_error_at"] {
            behaviour.processingErrorAt = try self.integer(
                at.node, path: "\(path).processing_error_at", range: 1...Int.max)
        }
        if let after = map["shutdown_after"] {
            behaviour.shutdownAfter = try self.integer(after.node, path: "\(path).shutdown_after", range: 0...Int.max)
        }
        if let after = map["drop_after"] {
            behaviour.dropAfter = try self.integer(after.node, path: "\(path).drop_after", range: 0...Int.max)
        }
        if let limit = map["payload_limit"] {
            behaviour.payloadLimitBytes = try self.integer(limit.node, path: "\(path).payload_limit", range: 1...4096)
        }
        if let tokens = map["feedback_tokens"] {
            let now = BinaryGateway.now()
            for (index, entry) in try self.sequence(tokens.node, path: "\(path).feedback_tokens").enumerated() {
                behaviour.feedbackTokens.append(
                    try self.feedbackTuple(entry, path: "\(path).feedback_tokens[\(index)]", now: now))
            }
        }
        scenario.binaryGateway = behaviour
    }

    /// A feedback-only entry: a token, or `{token, time}` with the time in UNIX seconds (default: now). Tokens
    /// of 1 to 100 bytes are allowed, so that a client's handling of a token that is not 32 bytes can be tried.
    private func feedbackTuple(_ entry: Node, path: String, now: UInt32) throws(ScenarioError) -> FeedbackTuple {
        var tokenNode = entry
        var time = now
        if entry.scalar == nil {
            let item = try self.mapping(entry, path: path, allowed: ["token", "time"])
            guard let token = item["token"] else { throw self.error(entry, path, "missing 'token'") }
            tokenNode = token.node
            if let value = item["time"] {
                time = UInt32(try self.integer(value.node, path: "\(path).time", range: 0...Int(UInt32.max)))
            }
        }
        let tokenPath = entry.scalar == nil ? "\(path).token" : path
        let hex = Array(try self.deviceToken(tokenNode, path: tokenPath).utf8)
        guard (2...2 * FeedbackReader.maxTokenBytes).contains(hex.count) else {
            throw self.error(
                tokenNode, tokenPath,
                "a feedback token is 1 to \(FeedbackReader.maxTokenBytes) bytes (2 to 200 hex digits)")
        }
        let token = stride(from: 0, to: hex.count, by: 2).map {
            UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16) ?? 0
        }
        return FeedbackTuple(timeEpochSeconds: time, token: token)
    }

    private func connections(_ node: Node, into scenario: inout SimulatorScenario) throws(ScenarioError) {
        let map = try self.mapping(
            node, path: "connections",
            allowed: [
                "max_concurrent_streams", "stream_limit_schedule", "goaway_after_streams", "drop_after_streams",
            ])
        if let limit = map["max_concurrent_streams"] {
            scenario.maxConcurrentStreams = try self.integer(
                limit.node, path: "connections.max_concurrent_streams", range: 1...1_000_000
            )
        }
        if let goaway = map["goaway_after_streams"] {
            scenario.goawayAfterStreams = try self.integer(
                goaway.node, path: "connections.goaway_after_streams", range: 1...Int.max
            )
        }
        if let drop = map["drop_after_streams"] {
            scenario.dropAfterStreams = try self.integer(
                drop.node, path: "connections.drop_after_streams", range: 1...Int.max
            )
        }
        if let schedule = map["stream_limit_schedule"] {
            let steps = try self.sequence(schedule.node, path: "connections.stream_limit_schedule")
            for (index, entry) in steps.enumerated() {
                let path = "connections.stream_limit_schedule[\(index)]"
                let item = try self.mapping(entry, path: path, allowed: ["after_streams", "max_concurrent_streams"])
                guard let after = item["after_streams"], let limit = item["max_concurrent_streams"] else {
                    throw self.error(entry, path, "each step needs 'after_streams' and 'max_concurrent_streams'")
                }
                scenario.streamLimitSchedule.append(
                    SimulatorScenario.StreamLimitStep(
                        afterStreams: try self.integer(after.node, path: "\(path).after_streams", range: 1...Int.max),
                        maxConcurrentStreams: try self.integer(
                            limit.node, path: "\(path).max_concurrent_streams", range: 1...1_000_000
                        )
                    )
                )
            }
            scenario.streamLimitSchedule.sort { $0.afterStreams < $1.afterStreams }
        }
    }

    // MARK: Typed access with located errors

    private func mapping(_ node: Node, path: String, allowed: Set<String>) throws(ScenarioError)
        -> [String: (node: Node, key: Node)]
    {
        guard let mapping = node.mapping else {
            throw self.error(node, path, "expected a mapping (key: value lines)")
        }
        var result: [String: (node: Node, key: Node)] = [:]
        for (key, value) in mapping {
            guard let name = key.string else { throw self.error(key, path, "keys must be strings") }
            let keyPath = path.isEmpty ? name : "\(path).\(name)"
            guard allowed.contains(name) else {
                throw self.error(
                    key, keyPath, "unknown key; expected one of \(allowed.sorted().joined(separator: ", "))")
            }
            result[name] = (value, key)
        }
        return result
    }

    private func sequence(_ node: Node, path: String) throws(ScenarioError) -> [Node] {
        guard let sequence = node.sequence else { throw self.error(node, path, "expected a list (- item lines)") }
        return Array(sequence)
    }

    private func string(_ node: Node, path: String) throws(ScenarioError) -> String {
        guard let scalar = node.scalar, !scalar.string.isEmpty else {
            throw self.error(node, path, "expected a non-empty string")
        }
        return scalar.string
    }

    private func strings(_ node: Node, path: String) throws(ScenarioError) -> [String] {
        var values: [String] = []
        for (index, entry) in try self.sequence(node, path: path).enumerated() {
            values.append(try self.string(entry, path: "\(path)[\(index)]"))
        }
        return values
    }

    private func integer(_ node: Node, path: String, range: ClosedRange<Int>) throws(ScenarioError) -> Int {
        guard node.scalar != nil, let value = node.int else { throw self.error(node, path, "expected an integer") }
        guard range.contains(value) else {
            throw self.error(node, path, "\(value) is out of range; use \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    private func rate(_ node: Node, path: String) throws(ScenarioError) -> Double {
        guard node.scalar != nil, let value = node.float, (0...1).contains(value) else {
            throw self.error(node, path, "expected a share between 0 and 1, e.g. 0.01 for 1%")
        }
        return value
    }

    private func deviceToken(_ node: Node, path: String) throws(ScenarioError) -> String {
        let token = try self.string(node, path: path)
        guard token.allSatisfy(\.isHexDigit), token.count % 2 == 0 else {
            throw self.error(node, path, "a device token is an even number of hex digits")
        }
        return token.lowercased()
    }

    private func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : (self.baseDirectory as NSString).appendingPathComponent(path)
    }

    private func error(_ node: Node, _ path: String, _ message: String) -> ScenarioError {
        ScenarioError(file: self.file, keyPath: path, line: node.mark.map { $0.line }, message: message)
    }
}

extension SimulatorScenario.JWTKey {
    /// A key from a command-line argument: `KID=FILE`, or `FILE` named `AuthKey_<KID>.p8` (Apple's naming).
    /// `FILE` is a PKCS#8 PEM private key (`.p8`) or a PEM package key; any team is accepted.
    package static func commandLineArgument(_ argument: String) throws(ScenarioError) -> SimulatorScenario.JWTKey {
        var keyID: String
        var path = argument
        if let equals = argument.firstIndex(of: "=") {
            keyID = String(argument[..<equals])
            path = String(argument[argument.index(after: equals)...])
        } else {
            let name = ((argument as NSString).lastPathComponent as NSString).deletingPathExtension
            guard name.hasPrefix("AuthKey_"), name.count > "AuthKey_".count else {
                throw ScenarioError(
                    file: argument,
                    keyPath: "--jwt-key",
                    line: nil,
                    message: "cannot tell the key ID from the file name; write --jwt-key KID=\(argument)"
                )
            }
            keyID = String(name.dropFirst("AuthKey_".count))
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ScenarioError(file: path, keyPath: "--jwt-key", line: nil, message: "cannot read the key file")
        }
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: text) {
            return SimulatorScenario.JWTKey(keyID: keyID, teamID: nil, publicKey: key.publicKey)
        }
        if let key = try? P256.Signing.PublicKey(pemRepresentation: text) {
            return SimulatorScenario.JWTKey(keyID: keyID, teamID: nil, publicKey: key)
        }
        throw ScenarioError(
            file: path, keyPath: "--jwt-key", line: nil, message: "not a PEM P-256 private (.p8) or package key"
        )
    }
}
