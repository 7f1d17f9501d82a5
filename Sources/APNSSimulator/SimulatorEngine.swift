import APNSCore
import Foundation
import Synchronization

/// One request as the simulator sees it, independent of the transport.
public struct SimulatorRequest: Sendable {
    /// `:method`.
    public var method: String
    /// `:path`.
    public var path: String
    /// Regular headers in the order received (names lower-case).
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: [UInt8]
    /// The connection it arrived on.
    public var connectionID: Int
    /// The number of streams opened on that connection so far, this one included.
    public var streamNumber: Int
    /// Whether the connection presented a trusted client certificate (certificate-based authentication).
    public var certificateAuthenticated: Bool

    /// Creates a request.
    public init(
        method: String,
        path: String,
        headers: [(name: String, value: String)],
        body: [UInt8],
        connectionID: Int,
        streamNumber: Int,
        certificateAuthenticated: Bool = false
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
        self.streamNumber = streamNumber
        self.certificateAuthenticated = certificateAuthenticated
    }
}

/// An answer the simulator gives.
public struct SimulatorAnswer: Sendable, Hashable {
    /// `:status`.
    public var status: Int
    /// Response headers (`apns-id`, `apns-unique-id`, `content-type`).
    public var headers: [HTTPField]
    /// The body: empty for 200, Apple's error JSON otherwise.
    public var body: [UInt8]

    /// A response header.
    public struct HTTPField: Sendable, Hashable {
        /// The name, lower-case.
        public var name: String
        /// The value.
        public var value: String
    }

    /// The reason of a non-200 answer, parsed back from the body.
    public var reason: Reason? { ErrorBody.parse(self.body)?.reason }
}

/// What to do with one request.
public enum SimulatorDecision: Sendable, Hashable {
    /// Answer after `delay`.
    case respond(SimulatorAnswer, delay: Duration)
    /// Leave the request unanswered: its connection is being dropped.
    case ignore
    /// Leave the request unanswered and drop the connection after `delay` (answers already written get that
    /// long to reach the client, so "answered" counts stay exact).
    case dropConnection(delay: Duration)
}

/// A connection-level action the transport carries out after a request.
public enum SimulatorConnectionAction: Sendable, Hashable {
    /// Announce a new `SETTINGS_MAX_CONCURRENT_STREAMS` on the request's connection.
    case setMaxConcurrentStreams(Int)
}

/// The simulator's brain: validates a request exactly as APNs does and decides the answer, injects the
/// scenario's faults, and counts everything. Pure logic (no I/O), so it is tested without a network; the
/// HTTP/2 server (``APNSSimulatorServer``) feeds it.
public final class SimulatorEngine: Sendable {
    /// How long a dropped connection's earlier answers get to reach the client before the drop.
    public static let dropGracePeriod: Duration = .milliseconds(50)

    private struct ConnectionState {
        var acceptedToken: String?
        var acceptedKeyID: String?
        var tokenAdoptedAt: Date?
        var dropping = false
        var scheduledUpToStream = 0
    }

    private struct State {
        var connections: [Int: ConnectionState] = [:]
        var adoptedTokens: Set<String> = []
        var statistics = SimulatorStatistics()
        var random: SplitMix64
    }

    /// The scenario in force.
    public let scenario: SimulatorScenario
    private let clock: any WallClock
    private let keysByID: [String: SimulatorScenario.JWTKey]
    private let state: Mutex<State>

    /// Creates an engine for `scenario`, reading the time from `clock`.
    public init(scenario: SimulatorScenario, clock: any WallClock = SystemWallClock()) {
        self.scenario = scenario
        self.clock = clock
        self.keysByID = Dictionary(scenario.jwtKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        self.state = Mutex(State(random: SplitMix64(seed: scenario.seed)))
    }

    /// A snapshot of the counts so far.
    public var statistics: SimulatorStatistics { self.state.withLock { $0.statistics } }

    /// Forgets a closed connection's token state.
    public func connectionClosed(_ connectionID: Int) {
        _ = self.state.withLock { $0.connections.removeValue(forKey: connectionID) }
    }

    /// Connection actions due now that `streamCount` streams arrived on connection `connectionID` (the
    /// stream-limit schedule). The transport reports counts when requests complete, so counts may skip values:
    /// every step passed since the previous call is due.
    public func connectionActions(connectionID: Int, streamCount: Int) -> [SimulatorConnectionAction] {
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
    public func handle(_ request: SimulatorRequest) -> SimulatorDecision {
        let token = Self.deviceToken(inPath: request.path)
        let now = self.clock.now()
        return self.state.withLock { state in
            state.statistics.requestsReceived += 1
            if let token { state.statistics.byToken[token, default: .init()].received += 1 }

            var connection = state.connections[request.connectionID] ?? ConnectionState()
            defer { state.connections[request.connectionID] = connection }
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

            let requestID = Self.header("apns-id", in: request.headers)
            var answer: SimulatorAnswer
            let tokenBefore = connection.acceptedToken
            let fault = self.validate(request, token: token, connection: &connection, now: now)
            if let adopted = connection.acceptedToken, adopted != tokenBefore {
                state.statistics.providerTokenAdoptions += 1
                if state.adoptedTokens.insert(adopted).inserted { state.statistics.distinctProviderTokens += 1 }
            }
            if let fault {
                answer = Self.answer(
                    status: fault.reason.status ?? 400, body: fault, requestID: requestID, now: now)
            } else if let injected = self.injectedFault(&state.random) {
                answer = Self.answer(
                    status: injected.status ?? 500, body: ErrorBody(reason: injected), requestID: requestID,
                    now: now)
            } else {
                answer = Self.answer(status: 200, body: nil, requestID: requestID, now: now)
            }
            state.statistics.requestsAnswered += 1
            state.statistics.byStatus[answer.status, default: 0] += 1
            if let reason = answer.reason { state.statistics.byReason[reason.rawValue, default: 0] += 1 }
            if let token {
                state.statistics.byToken[token, default: .init()].answered += 1
                if answer.status == 200 { state.statistics.byToken[token, default: .init()].delivered += 1 }
            }
            return .respond(answer, delay: self.scenario.latency)
        }
    }

    // MARK: Validation, in the order APNs reports faults

    private func validate(
        _ request: SimulatorRequest,
        token: String?,
        connection: inout ConnectionState,
        now: Date
    ) -> ErrorBody? {
        guard request.path.hasPrefix("/3/device/") || request.path == "/3/device" else {
            return ErrorBody(reason: .badPath)
        }
        guard request.method == "POST" else { return ErrorBody(reason: .methodNotAllowed) }
        let names = request.headers.map(\.name).filter { $0.hasPrefix("apns-") || $0 == "authorization" }
        if Set(names).count != names.count { return ErrorBody(reason: .duplicateHeaders) }

        if !request.certificateAuthenticated, let fault = self.validateProviderToken(request, &connection, now) {
            return fault
        }

        let pushTypeValue = Self.header("apns-push-type", in: request.headers) ?? PushType.alert.rawValue
        guard let pushType = PushType(rawValue: pushTypeValue) else { return ErrorBody(reason: .invalidPushType) }
        guard let topic = Self.header("apns-topic", in: request.headers) else {
            return ErrorBody(reason: .missingTopic)
        }
        if let reason = NotificationValidation.validateTopic(topic, pushType: pushType) {
            return ErrorBody(reason: reason)
        }
        let bundleID = String(topic.dropLast(pushType.topicSuffix.utf8.count))
        if !self.scenario.topics.isEmpty && !self.scenario.topics.contains(bundleID) {
            return ErrorBody(reason: .topicDisallowed)
        }
        if let priority = Self.header("apns-priority", in: request.headers),
            let reason = NotificationValidation.validatePriority(priority, pushType: pushType)
        {
            return ErrorBody(reason: reason)
        }
        if let expiration = Self.header("apns-expiration", in: request.headers),
            let reason = NotificationValidation.validateExpiration(expiration)
        {
            return ErrorBody(reason: reason)
        }
        if let messageID = Self.header("apns-id", in: request.headers),
            let reason = NotificationValidation.validateMessageID(messageID)
        {
            return ErrorBody(reason: reason)
        }
        if let collapseID = Self.header("apns-collapse-id", in: request.headers),
            let reason = NotificationValidation.validateCollapseID(collapseID)
        {
            return ErrorBody(reason: reason)
        }
        guard let token else { return ErrorBody(reason: .missingDeviceToken) }
        if let reason = NotificationValidation.validateDeviceToken(token) { return ErrorBody(reason: reason) }
        if self.scenario.badTokens.contains(token.lowercased()) { return ErrorBody(reason: .badDeviceToken) }
        if let reason = NotificationValidation.validatePayload(request.body, pushType: pushType) {
            return ErrorBody(reason: reason)
        }
        if let since = self.scenario.unregisteredTokens[token.lowercased()] {
            let timestamp = since > 0 ? since : Int64(now.timeIntervalSince1970 * 1000) - 86_400_000
            return ErrorBody(reason: .unregistered, timestampMilliseconds: timestamp)
        }
        return nil
    }

    private func validateProviderToken(
        _ request: SimulatorRequest,
        _ connection: inout ConnectionState,
        _ now: Date
    ) -> ErrorBody? {
        guard let authorization = Self.header("authorization", in: request.headers) else {
            return ErrorBody(reason: .missingProviderToken)
        }
        guard authorization.hasPrefix("bearer "), let jwt = ProviderTokenJWT.parse(String(authorization.dropFirst(7)))
        else { return ErrorBody(reason: .invalidProviderToken) }
        guard let key = self.keysByID[jwt.keyID] else { return ErrorBody(reason: .invalidProviderToken) }
        if let team = key.teamID, team != jwt.teamID { return ErrorBody(reason: .invalidProviderToken) }
        if let boundKey = connection.acceptedKeyID, boundKey != jwt.keyID {
            return ErrorBody(reason: .unrelatedKeyIdInToken)
        }
        let isConnectionToken = connection.acceptedToken == jwt.compact
        if !isConnectionToken && !jwt.hasValidSignature(publicKey: key.publicKey) {
            return ErrorBody(reason: .invalidProviderToken)
        }
        let ageSeconds = now.timeIntervalSince1970 - Double(jwt.issuedAtEpochSeconds)
        if ageSeconds > Self.seconds(self.scenario.maximumTokenAge) {
            return ErrorBody(reason: .expiredProviderToken)
        }
        if isConnectionToken { return nil }
        if let adoptedAt = connection.tokenAdoptedAt,
            now.timeIntervalSince(adoptedAt) < Self.seconds(self.scenario.minimumTokenUpdateInterval)
        {
            return ErrorBody(reason: .tooManyProviderTokenUpdates)
        }
        connection.acceptedToken = jwt.compact
        connection.acceptedKeyID = jwt.keyID
        connection.tokenAdoptedAt = now
        return nil
    }

    private func injectedFault(_ random: inout SplitMix64) -> Reason? {
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

    private static func answer(status: Int, body: ErrorBody?, requestID: String?, now: Date) -> SimulatorAnswer {
        let apnsID = requestID.flatMap { NotificationValidation.validateMessageID($0) == nil ? $0 : nil }
        // `date` (RFC 9110 §6.6.1: a server with a clock sends it) from the engine's clock, so `pushbridge doctor`
        // can measure clock skew against the simulator as it does against any HTTP server.
        var headers = [
            SimulatorAnswer.HTTPField(name: "apns-id", value: apnsID ?? UUID().uuidString.lowercased()),
            SimulatorAnswer.HTTPField(name: "apns-unique-id", value: UUID().uuidString.lowercased()),
            SimulatorAnswer.HTTPField(name: "date", value: HTTPDate.format(now)),
        ]
        if body != nil {
            headers.append(SimulatorAnswer.HTTPField(name: "content-type", value: "application/json"))
        }
        return SimulatorAnswer(status: status, headers: headers, body: body?.jsonBytes ?? [])
    }

    static func deviceToken(inPath path: String) -> String? {
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count else { return nil }
        return String(path.dropFirst(prefix.count))
    }

    static func header(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name == name }?.value
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// A small, seedable generator (SplitMix64): the same seed and request order give the same faults. Public so
/// that sample data (the demo's events) is reproducible the same way.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { self.state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in 0..<1.
    public mutating func nextUnitInterval() -> Double {
        Double(self.next() >> 11) / Double(UInt64(1) << 53)
    }
}
