import APNSCore
import Foundation

/// The paths of Apple's broadcast APIs (Apple: *Sending channel management requests to APNs*, *Sending
/// broadcast push notification requests to APNs*). Apple serves channel management on its own hosts; the
/// simulator serves both on its one port, and a client points both endpoints at it.
enum ChannelRoute: Hashable {
    /// `/1/apps/<bundleID>/channels`: create (POST), read (GET), delete (DELETE).
    case channels(bundleID: String)
    /// `/1/apps/<bundleID>/all-channels`: list (GET).
    case allChannels(bundleID: String)
    /// `/4/broadcasts/apps/<bundleID>`: a broadcast send (POST).
    case broadcast(bundleID: String)
    /// Under `/1/` or `/4/` but none of the above: `404 BadPath`.
    case unknown

    /// The route of `path`; `nil` for a path outside these APIs (device sends, `/3/device/...`).
    init?(path: String) {
        if path.hasPrefix("/1/") {
            self = Self.management(path)
        } else if path.hasPrefix("/4/") {
            let prefix = "/4/broadcasts/apps/"
            let bundleID = path.dropFirst(prefix.count)
            self =
                path.hasPrefix(prefix) && !bundleID.isEmpty && !bundleID.contains("/")
                ? .broadcast(bundleID: String(bundleID)) : .unknown
        } else {
            return nil
        }
    }

    /// Parses `/1/apps/<bundleID>/<resource>` exactly.
    static func management(_ path: String) -> ChannelRoute {
        let parts = path.dropFirst("/1/".count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "apps", !parts[1].isEmpty else { return .unknown }
        switch parts[2] {
        case "channels": return .channels(bundleID: String(parts[1]))
        case "all-channels": return .allChannels(bundleID: String(parts[1]))
        default: return .unknown
        }
    }

    var bundleID: String? {
        switch self {
        case .channels(let bundleID), .allChannels(let bundleID), .broadcast(let bundleID): bundleID
        case .unknown: nil
        }
    }

    var allowedMethods: [String] {
        switch self {
        case .channels: ["POST", "GET", "DELETE"]
        case .allChannels, .unknown: ["GET"]
        case .broadcast: ["POST"]
        }
    }
}

/// How the simulator answers one broadcast or channel management request.
struct ChannelReply {
    var status: Int
    var error: ErrorBody?
    /// A success's JSON body (a read, a list).
    var body: [UInt8] = []
    /// The `apns-channel-id` of a create.
    var createdChannelID: String?

    static func refuse(_ reason: Reason) -> ChannelReply {
        ChannelReply(status: reason.status ?? 400, error: ErrorBody(reason: reason))
    }
}

extension SimulatorEngine {
    /// Decides a broadcast or channel management request: checked as APNs checks it, carried out on the channel
    /// store, counted, and answered with `apns-request-id` (echoed when the request's is a UUID).
    func decide(
        _ route: ChannelRoute,
        _ request: SimulatorRequest,
        fields: SimulatorRequestFields,
        connection: inout ConnectionState,
        now: Date,
        _ state: inout State
    ) -> SimulatorDecision {
        let tokenBefore = connection.acceptedToken
        var reply = self.reply(route, request, fields: fields, connection: &connection, now: now, &state)
        Self.countAdoption(since: tokenBefore, connection, &state)
        if case .broadcast = route, reply.error == nil, let injected = self.injectedFault(&state.random) {
            reply = .refuse(injected)
        }
        if case .broadcast(let bundleID) = route, let channelID = fields.channelID,
            state.channels.storagePolicy(of: channelID, bundleID: bundleID) != nil
        {
            state.statistics.byChannel[channelID, default: .init()].count(answeredWith: reply.status)
        }
        state.statistics.countAnswer(status: reply.status, reason: reply.error?.reason)
        if case .broadcast = route {
            state.statistics.recordBroadcast(
                SimulatorStatistics.BroadcastRequest(
                    path: request.path, channelID: fields.channelID, pushType: fields.pushType, topic: fields.topic,
                    priority: fields.priority, expiration: fields.expiration, requestID: fields.requestID,
                    messageID: fields.messageID, collapseID: fields.collapseID, status: reply.status))
        }

        var headers = [
            SimulatorAnswer.HTTPField(name: "apns-request-id", value: Self.echoedID(fields.requestID, &state)),
            SimulatorAnswer.HTTPField(name: "date", value: Self.date(now, &state)),
        ]
        if let channelID = reply.createdChannelID {
            headers.append(SimulatorAnswer.HTTPField(name: "apns-channel-id", value: channelID))
        }
        let body = reply.error?.jsonBytes ?? reply.body
        if !body.isEmpty {
            headers.append(SimulatorAnswer.HTTPField(name: "content-type", value: "application/json"))
        }
        return .respond(
            SimulatorAnswer(status: reply.status, headers: headers, body: body), delay: self.answerDelay(&state))
    }

    private func reply(
        _ route: ChannelRoute,
        _ request: SimulatorRequest,
        fields: SimulatorRequestFields,
        connection: inout ConnectionState,
        now: Date,
        _ state: inout State
    ) -> ChannelReply {
        guard let bundleID = route.bundleID else { return .refuse(.badPath) }
        guard route.allowedMethods.contains(request.method) else { return .refuse(.methodNotAllowed) }
        if fields.hasDuplicates { return .refuse(.duplicateHeaders) }
        if !request.certificateAuthenticated,
            let fault = self.validateProviderToken(fields.authorization, &connection, &state.statistics, now)
        {
            return ChannelReply(status: fault.reason.status ?? 403, error: fault)
        }
        if let requestID = fields.requestID, NotificationValidation.validateMessageID(requestID) != nil {
            return .refuse(.badMessageId)
        }
        if !self.scenario.topics.isEmpty && !self.scenario.topics.contains(bundleID) {
            return .refuse(.topicDisallowed)
        }
        switch (route, request.method) {
        case (.channels, "POST"):
            return Self.create(bundleID, body: request.body, &state)
        case (.channels, "GET"):
            return Self.withChannel(fields.channelID, bundleID, state) { _, policy in
                ChannelReply(
                    status: 200, body: Array(#"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#.utf8))
            }
        case (.channels, _):
            let found = Self.withChannel(fields.channelID, bundleID, state) { _, _ in ChannelReply(status: 204) }
            if found.error == nil, let channelID = fields.channelID {
                _ = state.channels.delete(channelID, bundleID: bundleID)
                state.statistics.channelsDeleted += 1
            }
            return found
        case (.allChannels, _):
            let list = state.channels.list(bundleID: bundleID).map { "\"\(JSONText.escaped($0))\"" }
            return ChannelReply(status: 200, body: Array("{\"channels\":[\(list.joined(separator: ","))]}".utf8))
        default:
            return Self.broadcast(bundleID, request.body, fields, state)
        }
    }

    /// A create: the body is `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`.
    private static func create(_ bundleID: String, body: [UInt8], _ state: inout State) -> ChannelReply {
        guard !body.isEmpty else { return .refuse(.payloadEmpty) }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            return .refuse(.badRequestPayload)
        }
        guard let pushType = object["push-type"] else { return .refuse(.missingPushType) }
        guard pushType as? String == "LiveActivity" else { return .refuse(.invalidPushType) }
        // Decoded apart, so that `true`, `"1"` and `1.5` are refused as the integer Apple documents is not there.
        guard let policy = try? JSONDecoder().decode(CreateBody.self, from: Data(body)).storagePolicy,
            policy == 0 || policy == 1
        else { return .refuse(.badRequestParams) }
        let channelID = SimulatorChannels.newID(&state.uniqueIDs)
        guard state.channels.create(channelID, bundleID: bundleID, storagePolicy: policy) else {
            // Apple's answer at its per-app limit; also the simulator's at its own limit over all apps.
            return .refuse(.cannotCreateChannelConfig)
        }
        state.statistics.channelsCreated += 1
        return ChannelReply(status: 201, createdChannelID: channelID)
    }

    /// The storage policy of a create's body.
    private struct CreateBody: Decodable {
        var storagePolicy: Int

        enum CodingKeys: String, CodingKey {
            case storagePolicy = "message-storage-policy"
        }
    }

    /// Runs `body` with the request's channel, or refuses: no header `MissingChannelId`, not base64
    /// `BadChannelId`, unknown to the app `ChannelNotRegistered`.
    private static func withChannel(
        _ channelID: String?, _ bundleID: String, _ state: State, _ body: (String, Int) -> ChannelReply
    ) -> ChannelReply {
        guard let channelID else { return .refuse(.missingChannelId) }
        guard SimulatorChannels.isWellFormed(channelID) else { return .refuse(.badChannelId) }
        guard let policy = state.channels.storagePolicy(of: channelID, bundleID: bundleID) else {
            return .refuse(.channelNotRegistered)
        }
        return body(channelID, policy)
    }

    /// A broadcast send, checked where Apple's rules for device sends apply (push type, topic, priority,
    /// expiration, payload) and then against the channel.
    private static func broadcast(
        _ bundleID: String, _ body: [UInt8], _ fields: SimulatorRequestFields, _ state: State
    ) -> ChannelReply {
        guard let pushTypeName = fields.pushType else { return .refuse(.missingPushType) }
        guard pushTypeName == PushType.liveactivity.rawValue else { return .refuse(.invalidPushType) }
        if let topic = fields.topic, topic != PushType.liveactivity.topic(for: bundleID) {
            return .refuse(.topicDisallowed)
        }
        if let priority = fields.priority,
            let reason = NotificationValidation.validatePriority(priority, pushType: .liveactivity)
        {
            return .refuse(reason)
        }
        if let expiration = fields.expiration, let reason = NotificationValidation.validateExpiration(expiration) {
            return .refuse(reason)
        }
        return Self.withChannel(fields.channelID, bundleID, state) { _, policy in
            // Apple: a channel that stores no messages takes only expiration 0.
            if policy == 0, let expiration = fields.expiration, expiration != "0" {
                return .refuse(.badExpirationDate)
            }
            if let reason = NotificationValidation.validatePayload(
                body, limit: NotificationValidation.maximumBroadcastPayloadBytes)
            {
                return .refuse(reason)
            }
            return ChannelReply(status: 200)
        }
    }
}
