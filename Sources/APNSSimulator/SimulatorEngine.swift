import APNSCore
import Crypto
import Foundation
import NIOSSL
import Synchronization
import Waiting

/// One request as the simulator sees it, independent of the transport.
package struct SimulatorRequest: Sendable {
    /// `:method`.
    package var method: String
    /// `:path`.
    package var path: String
    /// Regular headers in the order received (names lower-case).
    package var headers: [(name: String, value: String)]
    /// The body.
    package var body: [UInt8]
    /// The connection it arrived on.
    package var connectionID: Int
    /// The number of streams opened on that connection so far, this one included.
    package var streamNumber: Int
    /// Whether the connection presented a trusted client certificate (certificate-based authentication).
    package var certificateAuthenticated: Bool
    /// The SHA-256 fingerprint (``fingerprint(of:)``) of the client certificate the connection
    /// presented; `nil` without one.
    package var clientCertificate: String?

    /// Creates a request.
    package init(
        method: String,
        path: String,
        headers: [(name: String, value: String)],
        body: [UInt8],
        connectionID: Int,
        streamNumber: Int,
        certificateAuthenticated: Bool = false,
        clientCertificate: String? = nil
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
        self.streamNumber = streamNumber
        self.certificateAuthenticated = certificateAuthenticated
        self.clientCertificate = clientCertificate
    }

    /// A certificate's SHA-256 fingerprint over its DER encoding, in lower-case hex (as `openssl x509 -fingerprint
    /// -sha256` prints it, without the colons); `nil` when it cannot be encoded.
    package static func fingerprint(of certificate: NIOSSLCertificate) -> String? {
        guard let der = try? certificate.toDERBytes() else { return nil }
        return SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
    }
}

/// An answer the simulator gives.
package struct SimulatorAnswer: Sendable, Hashable {
    /// `:status`.
    package var status: Int
    /// Response headers (`apns-id`, `apns-unique-id`, `content-type`).
    package var headers: [HTTPField]
    /// The body: empty for 200, Apple's error JSON otherwise.
    package var body: [UInt8]

    /// A response header.
    package struct HTTPField: Sendable, Hashable {
        /// The name, lower-case.
        package var name: String
        /// The value.
        package var value: String
    }

    /// The reason of a non-200 answer, parsed back from the body.
    package var reason: Reason? { ErrorBody.parse(self.body)?.reason }
}

/// What to do with one request.
package enum SimulatorDecision: Sendable, Hashable {
    /// Answer after `delay`.
    case respond(SimulatorAnswer, delay: Duration)
    /// Leave the request unanswered: its connection is being dropped.
    case ignore
    /// Leave the request unanswered and drop the connection after `delay` (answers already written get that
    /// long to reach the client, so "answered" counts stay exact).
    case dropConnection(delay: Duration)
}

/// A connection-level action the transport carries out after a request.
package enum SimulatorConnectionAction: Sendable, Hashable {
    /// Announce a new `SETTINGS_MAX_CONCURRENT_STREAMS` on the request's connection.
    case setMaxConcurrentStreams(Int)
}

/// The simulator's brain: validates a request exactly as APNs does and decides the answer, injects the
/// scenario's faults, and counts everything. Pure logic (no I/O), so it is tested without a network; the
/// HTTP/2 server (``APNSSimulatorServer``) feeds it.
package final class SimulatorEngine: Sendable {
    /// How long a dropped connection's earlier answers get to reach the client before the drop.
    package static let dropGracePeriod: Duration = .milliseconds(50)

    struct ConnectionState {
        /// The `authorization` value taken into use, and its key: later tokens must use the same key.
        var acceptedToken: String?
        var acceptedKeyID: String?
        var tokenAdoptedAt: Date?
        var verifiedTokens = VerifiedProviderTokens()
        var dropping = false
        var scheduledUpToStream = 0
    }

    struct State {
        var connections: [Int: ConnectionState] = [:]
        var adoptedTokens: Set<String> = []
        var statistics = SimulatorStatistics()
        var random: SplitMix64
        /// `apns-unique-id` values: random, and apart from `random` so that they leave the seeded faults alone.
        var uniqueIDs: SplitMix64
        /// The `date` header of the current second (answers within one second share it).
        var date: (second: Double, value: String) = (.nan, "")
        /// Broadcast channels per app.
        var channels: SimulatorChannels
        /// Draws the answers' extra delays (`latency_jitter_ms`): seeded, and apart from `random` so that jitter
        /// leaves the seeded faults alone.
        var jitter: SplitMix64
        /// The first requests received, in order (`receive_log`).
        var receiveLog: [ReceivedRequest] = []
    }

    /// The scenario in force.
    package let scenario: SimulatorScenario
    private let clock: any WallClock
    /// The provider keys it trusts, by key ID: the scenario's, changed by ``trust(_:)`` and ``revoke(keyID:)``. Read
    /// under ``state``'s lock, never the other way round.
    private let trustedKeys: Mutex<[String: SimulatorScenario.JWTKey]>
    let maximumTokenAgeSeconds: Double
    let minimumTokenUpdateIntervalSeconds: Double
    let state: Mutex<State>

    /// Creates an engine for `scenario`, reading the time from `clock`.
    package init(scenario: SimulatorScenario, clock: any WallClock = SystemWallClock()) {
        self.scenario = scenario
        self.clock = clock
        self.trustedKeys = Mutex(
            Dictionary(scenario.jwtKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last }))
        self.maximumTokenAgeSeconds = Self.seconds(scenario.maximumTokenAge)
        self.minimumTokenUpdateIntervalSeconds = Self.seconds(scenario.minimumTokenUpdateInterval)
        self.state = Mutex(
            State(
                random: SplitMix64(seed: scenario.seed), uniqueIDs: SplitMix64(seed: .random(in: .min ... .max)),
                channels: SimulatorChannels(
                    limitPerApp: scenario.channelLimitPerApp, limitTotal: scenario.channelLimitTotal,
                    preset: scenario.channels),
                jitter: SplitMix64(seed: scenario.seed ^ 0x6A09_E667_F3BC_C908)))
        self.jitterMilliseconds =
            UInt64(max(0, scenario.latencyJitter.components.seconds)) * 1000
            + UInt64(max(0, scenario.latencyJitter.components.attoseconds / 1_000_000_000_000_000))
    }

    /// The trusted provider key `keyID`, if any.
    func trustedKey(_ keyID: String) -> SimulatorScenario.JWTKey? {
        self.trustedKeys.withLock { $0[keyID] }
    }

    /// Trusts `key` from now on, as APNs does for a key created in the developer account.
    package func trust(_ key: SimulatorScenario.JWTKey) {
        self.trustedKeys.withLock { $0[key.keyID] = key }
    }

    /// Stops trusting the key `keyID`, as APNs does once a key is revoked: every request whose provider token it signed
    /// is refused with `403 InvalidProviderToken` from now on, also on connections that used it before.
    package func revoke(keyID: String) {
        _ = self.trustedKeys.withLock { $0.removeValue(forKey: keyID) }
    }

    /// A snapshot of the counts so far.
    package var statistics: SimulatorStatistics { self.state.withLock { $0.statistics } }

    /// How many requests were handled, for waiting on: bumped after each, so that a test waits for the statistics to
    /// show something instead of polling them.
    let handled = AsyncCondition(UInt64(0))

    /// Waits until at least `count` requests were answered; `false` when `deadline` passed first.
    package func waitForAnswers(_ count: Int, deadline: ContinuousClock.Instant) async -> Bool {
        await self.waitForStatistics(deadline: deadline) { $0.requestsAnswered >= count }
    }

    /// Waits until `condition` holds for the statistics, checked at once and after every request handled; `false` when
    /// `deadline` passed first.
    package func waitForStatistics(
        deadline: ContinuousClock.Instant, until condition: @escaping @Sendable (SimulatorStatistics) -> Bool
    ) async -> Bool {
        await self.handled.wait(deadline: deadline) { _ in condition(self.statistics) ? () : nil }.value != nil
    }

    /// The upper bound of the answers' random extra delay, in whole milliseconds (0: none).
    let jitterMilliseconds: UInt64

    /// The first ``SimulatorScenario/receiveLogLimit`` requests received, in the order the simulator received
    /// them: what a test compares with the order it produced notifications in.
    package var receivedRequests: [ReceivedRequest] { self.state.withLock { $0.receiveLog } }

    /// The delay before an answer: the scenario's latency plus its random jitter.
    func answerDelay(_ state: inout State) -> Duration {
        guard self.jitterMilliseconds > 0 else { return self.scenario.latency }
        let extra = state.jitter.next() % (self.jitterMilliseconds + 1)
        return self.scenario.latency + .milliseconds(Int64(extra))
    }

    /// Forgets a closed connection's token state.
    package func connectionClosed(_ connectionID: Int) {
        _ = self.state.withLock { $0.connections.removeValue(forKey: connectionID) }
    }

    /// Connection actions due now that `streamCount` streams arrived on connection `connectionID` (the
    /// stream-limit schedule). The transport reports counts when requests complete, so counts may skip values:
    /// every step passed since the previous call is due.
    package func connectionActions(connectionID: Int, streamCount: Int) -> [SimulatorConnectionAction] {
        guard !self.scenario.streamLimitSchedule.isEmpty else { return [] }
        let due = self.state.withLock { state in
            let previous = state.connections[connectionID]?.scheduledUpToStream ?? 0
            guard streamCount > previous else { return [SimulatorScenario.StreamLimitStep]() }
            state.connections[connectionID, default: ConnectionState()].scheduledUpToStream = streamCount
            let due = self.scenario.streamLimitSchedule.filter {
                $0.afterStreams > previous && $0.afterStreams <= streamCount
            }
            state.statistics.streamLimitChanges += due.count
            return due
        }
        // Only the latest limit matters when several steps passed at once.
        return due.last.map { [.setMaxConcurrentStreams($0.maxConcurrentStreams)] } ?? []
    }

    /// Decides what to do with `request` and counts it.
    package func handle(_ request: SimulatorRequest) -> SimulatorDecision {
        let token = Self.deviceToken(inPath: request.path)
        let fields = SimulatorRequestFields(request.headers)
        let now = self.clock.now()
        let decision = self.state.withLock { state in
            state.statistics.requestsReceived += 1
            if let certificate = request.clientCertificate {
                state.statistics.byClientCertificate[certificate, default: 0] += 1
            }
            // Taken out and put back, so its token list is mutated in place rather than copied.
            var connection = state.connections.removeValue(forKey: request.connectionID) ?? ConnectionState()
            defer { state.connections[request.connectionID] = connection }
            let decision = self.decide(request, token: token, fields: fields, connection: &connection, now: now, &state)
            var status: Int?
            if case .respond(let answer, _) = decision { status = answer.status }
            if let token {
                state.statistics.byToken[token, default: .init()].count(answeredWith: status)
            }
            if state.receiveLog.count < self.scenario.receiveLogLimit {
                state.receiveLog.append(
                    ReceivedRequest(
                        path: request.path, deviceToken: token, apnsID: fields.messageID, status: status))
            }
            return decision
        }
        self.handled.withLock { $0 += 1 }
        return decision
    }

    private func decide(
        _ request: SimulatorRequest,
        token: String?,
        fields: SimulatorRequestFields,
        connection: inout ConnectionState,
        now: Date,
        _ state: inout State
    ) -> SimulatorDecision {
        if connection.dropping {
            state.statistics.requestsUnanswered += 1
            return .ignore
        }
        if let dropAfter = self.scenario.dropAfterStreams, request.streamNumber >= dropAfter {
            connection.dropping = true
            state.statistics.requestsUnanswered += 1
            state.statistics.connectionsDropped += 1
            return .dropConnection(delay: Self.dropGracePeriod)
        }

        if let route = ChannelRoute(path: request.path) {
            return self.decide(route, request, fields: fields, connection: &connection, now: now, &state)
        }
        let tokenBefore = connection.acceptedToken
        let fault = self.validate(
            request, token: token, fields: fields, connection: &connection, statistics: &state.statistics, now: now)
        Self.countAdoption(since: tokenBefore, connection, &state)
        let status: Int
        let body: ErrorBody?
        if let fault {
            (status, body) = (fault.reason.status ?? 400, fault)
        } else if let injected = self.injectedFault(&state.random) {
            (status, body) = (injected.status ?? 500, ErrorBody(reason: injected))
        } else {
            (status, body) = (200, nil)
        }
        state.statistics.countAnswer(status: status, reason: body?.reason)
        let answer = self.answer(status: status, body: body, requestID: fields.messageID, now: now, &state)
        return .respond(answer, delay: self.answerDelay(&state))
    }

    // MARK: Validation, in the order APNs reports faults

    private func validate(
        _ request: SimulatorRequest,
        token: String?,
        fields: SimulatorRequestFields,
        connection: inout ConnectionState,
        statistics: inout SimulatorStatistics,
        now: Date
    ) -> ErrorBody? {
        guard request.path.hasPrefix("/3/device/") || request.path == "/3/device" else {
            return ErrorBody(reason: .badPath)
        }
        guard request.method == "POST" else { return ErrorBody(reason: .methodNotAllowed) }
        if fields.hasDuplicates { return ErrorBody(reason: .duplicateHeaders) }

        if !request.certificateAuthenticated,
            let fault = self.validateProviderToken(fields.authorization, &connection, &statistics, now)
        {
            return fault
        }

        guard let pushType = PushType(rawValue: fields.pushType ?? PushType.alert.rawValue) else {
            return ErrorBody(reason: .invalidPushType)
        }
        guard let topic = fields.topic else { return ErrorBody(reason: .missingTopic) }
        if let reason = NotificationValidation.validateTopic(topic, pushType: pushType) {
            return ErrorBody(reason: reason)
        }
        if !self.scenario.topics.isEmpty
            && !self.scenario.topics.contains(String(topic.dropLast(pushType.topicSuffix.utf8.count)))
        {
            return ErrorBody(reason: .topicDisallowed)
        }
        if let priority = fields.priority,
            let reason = NotificationValidation.validatePriority(priority, pushType: pushType)
        {
            return ErrorBody(reason: reason)
        }
        if let expiration = fields.expiration, let reason = NotificationValidation.validateExpiration(expiration) {
            return ErrorBody(reason: reason)
        }
        if let messageID = fields.messageID, let reason = NotificationValidation.validateMessageID(messageID) {
            return ErrorBody(reason: reason)
        }
        if let collapseID = fields.collapseID, let reason = NotificationValidation.validateCollapseID(collapseID) {
            return ErrorBody(reason: reason)
        }
        guard let token else { return ErrorBody(reason: .missingDeviceToken) }
        if let reason = NotificationValidation.validateDeviceToken(token) { return ErrorBody(reason: reason) }
        // The lists hold lower-case tokens; most scenarios have none, and then no lower-cased copy is made.
        let listed =
            self.scenario.badTokens.isEmpty && self.scenario.unregisteredTokens.isEmpty ? nil : token.lowercased()
        if let listed, self.scenario.badTokens.contains(listed) { return ErrorBody(reason: .badDeviceToken) }
        if let reason = NotificationValidation.validatePayload(request.body, pushType: pushType) {
            return ErrorBody(reason: reason)
        }
        if let listed, let since = self.scenario.unregisteredTokens[listed] {
            let timestamp = since > 0 ? since : Int64(now.timeIntervalSince1970 * 1000) - 86_400_000
            return ErrorBody(reason: .unregistered, timestampMilliseconds: timestamp)
        }
        return nil
    }

    /// Counts a provider token the connection took into use since `before`.
    static func countAdoption(since before: String?, _ connection: ConnectionState, _ state: inout State) {
        if let adopted = connection.acceptedToken, adopted != before {
            state.statistics.providerTokenAdoptions += 1
            if state.adoptedTokens.insert(adopted).inserted { state.statistics.distinctProviderTokens += 1 }
        }
    }

    func injectedFault(_ random: inout SplitMix64) -> Reason? {
        let total =
            self.scenario.tooManyRequestsRate + self.scenario.internalServerErrorRate
            + self.scenario.serviceUnavailableRate
        guard total > 0 else { return nil }
        let draw = random.nextUnitInterval()
        if draw < self.scenario.tooManyRequestsRate { return .tooManyRequests }
        if draw < self.scenario.tooManyRequestsRate + self.scenario.internalServerErrorRate {
            return .internalServerError
        }
        if draw < total { return .serviceUnavailable }
        return nil
    }

    // MARK: Helpers

    private func answer(
        status: Int, body: ErrorBody?, requestID: String?, now: Date, _ state: inout State
    ) -> SimulatorAnswer {
        var headers = [
            SimulatorAnswer.HTTPField(name: "apns-id", value: Self.echoedID(requestID, &state)),
            SimulatorAnswer.HTTPField(name: "apns-unique-id", value: Self.uuid(&state.uniqueIDs)),
            SimulatorAnswer.HTTPField(name: "date", value: Self.date(now, &state)),
        ]
        if body != nil {
            headers.append(SimulatorAnswer.HTTPField(name: "content-type", value: "application/json"))
        }
        return SimulatorAnswer(status: status, headers: headers, body: body?.jsonBytes ?? [])
    }

    /// The request's id when it is a valid UUID (APNs echoes it), else a new one.
    static func echoedID(_ requestID: String?, _ state: inout State) -> String {
        if let requestID, NotificationValidation.validateMessageID(requestID) == nil { return requestID }
        return Self.uuid(&state.uniqueIDs)
    }

    /// The `date` header for `now` (RFC 9110 §6.6.1: a server with a clock sends it) from the engine's clock, so
    /// `pushbridge doctor` can measure clock skew against the simulator as it does against any HTTP server.
    static func date(_ now: Date, _ state: inout State) -> String {
        let second = now.timeIntervalSince1970.rounded(.down)
        if state.date.second != second { state.date = (second, HTTPDate.format(now)) }
        return state.date.value
    }

    /// A random (version 4) UUID in lower case, from `generator`: Foundation's `UUID()` reads the system's random
    /// source on every call, which showed in the simulator's profile.
    static func uuid(_ generator: inout SplitMix64) -> String {
        let (high, low) = (generator.next(), generator.next())
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { buffer in
            buffer.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
            buffer.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
            buffer[6] = buffer[6] & 0x0F | 0x40  // version 4
            buffer[8] = buffer[8] & 0x3F | 0x80  // RFC 4122 variant
        }
        return UUID(uuid: bytes).lowercasedString
    }

    static func deviceToken(inPath path: String) -> String? {
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count else { return nil }
        // After an ASCII prefix, by UTF-8 offset (dropping Characters would run grapheme breaking on each).
        return String(path[path.utf8.index(path.startIndex, offsetBy: prefix.utf8.count)...])
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// One request as the simulator received it (`receive_log`).
package struct ReceivedRequest: Sendable, Hashable {
    /// The request's `:path`.
    package var path: String
    /// The device token in the path, for a device send.
    package var deviceToken: String?
    /// The request's `apns-id`, when it sent one.
    package var apnsID: String?
    /// The status it was answered with; `nil` when it was left unanswered (a dropped connection).
    package var status: Int?
}
