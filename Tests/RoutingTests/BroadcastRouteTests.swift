import APNSCore
import Foundation
import Routing
import Testing

/// Routes with `channel_id`: Live Activity broadcasts to a channel instead of pushes to device tokens
/// (docs/configuration.md, `routes`; docs/templates.md).
@Suite struct BroadcastRouteTests {
    static let channel = "dHN0LXNyY2gtY2hubA=="

    /// A valid broadcast route to break one field at a time.
    static func spec(_ configure: (inout RouteSpec) -> Void = { _ in }) -> RouteSpec {
        var spec = RouteSpec(
            name: "scores", inputTopic: "events", deviceTokens: "", topic: "com.example.app",
            pushType: "liveactivity",
            payload: ["aps": ["event": "update", "content-state": ["score": "{{score}}"]]],
            channelID: "{{match.channel}}")
        configure(&spec)
        return spec
    }

    static func router(_ configure: (inout RouteSpec) -> Void = { _ in }) throws -> Router {
        try Router(routes: [Self.spec(configure)], epochSeconds: { 1_800_000_000 })
    }

    @Test func aBroadcastRouteMakesOneBroadcastPerEvent() throws {
        let mapped = try notifications(
            Self.router(), #"{"match":{"channel":"\#(Self.channel)"},"score":"2-1"}"#)
        try #require(mapped.count == 1)
        let notification = mapped[0].notification
        #expect(notification.channelID == Self.channel)
        #expect(notification.deviceToken == "")
        #expect(notification.topic == "com.example.app.push-type.liveactivity")
        #expect(notification.pushType == .liveactivity)
        #expect(notification.expirationEpochSeconds == 0, "Apple requires apns-expiration on a broadcast")
        #expect(notification.path == "/4/broadcasts/apps/com.example.app")
        #expect(mapped[0].localRejection == nil)
        #expect(payloadText(mapped[0]) == #"{"aps":{"event":"update","content-state":{"score":"2-1"}}}"#)
        #expect(
            notification.id
                == NotificationID.make(topic: "events", partition: 3, offset: 42, route: "scores", tokenIndex: 0))
    }

    @Test func aFixedChannelAndAnExpirationAreTaken() throws {
        let router = try Self.router {
            $0.channelID = Self.channel
            $0.ttl = .seconds(3600)
        }
        let mapped = try notifications(router, #"{"score":"0-0"}"#)
        #expect(mapped.first?.notification.channelID == Self.channel)
        #expect(mapped.first?.notification.expirationEpochSeconds == 1_800_003_600)
    }

    @Test func aChannelInTextWithTagsIsRendered() throws {
        let router = try Self.router { $0.channelID = "{{a}}{{b}}==" }
        let mapped = try notifications(router, #"{"a":"dHN0LXNy","b":"Y2gtY2hubA"}"#)
        #expect(mapped.first?.notification.channelID == Self.channel)
    }

    @Test func aBroadcastPayloadMayHold5120Bytes() throws {
        let router = try Self.router { $0.payload = ["aps": ["event": "update"], "x": "{{big}}"] }
        func mapped(_ size: Int) throws -> MappedNotification? {
            let big = String(repeating: "a", count: size)
            return try notifications(router, #"{"match":{"channel":"\#(Self.channel)"},"big":"\#(big)"}"#).first
        }
        #expect(try mapped(4500)?.localRejection == nil, "over a device push's 4096, within a broadcast's 5120")
        #expect(try mapped(5200)?.localRejection == .payloadTooLarge)
    }

    @Test(
        arguments: [
            (#"{}"#, "route scores: channel_id: match.channel is missing"),
            (
                #"{"match":{"channel":null}}"#,
                "route scores: channel_id: match.channel is null, so the channel ID is missing"
            ),
            (#"{"match":{"channel":""}}"#, "route scores: channel_id: the channel ID rendered empty (missing)"),
            (
                #"{"match":{"channel":42}}"#,
                "route scores: channel_id: match.channel is an integer; expected a channel ID string"
            ),
            (
                #"{"match":{"channel":["a"]}}"#,
                "route scores: channel_id: match.channel is an array; expected a channel ID string"
            ),
            (
                #"{"match":{"channel":"not base64!"}}"#,
                "which is not a channel ID (base64, at most 256 bytes; APNs would answer BadChannelId)"
            ),
            (#"{"match":{"channel":"ab\ncd=="}}"#, "which is not a channel ID"),
            (#"{"match":{"channel":"abc"}}"#, "which is not a channel ID"),
            (
                #"{"match":{"channel":"\#(String(repeating: "AAAA", count: 100))"}}"#,
                "match.channel is 400 bytes; a channel ID is at most 256"
            ),
            (#"{"match":{"channel":"\#(String(repeating: "AAAA", count: 65))"}}"#, "match.channel is 260 bytes"),
        ])
    func hostileChannelIDsAreDeadLettersNamingTheField(json: String, expected: String) throws {
        let reason = try deadLetter(Self.router(), json)
        #expect(reason?.field == "channel_id")
        #expect(reason?.description.contains(expected) == true, "\(String(describing: reason))")
        #expect(reason?.description.contains("\n") == false, "the event's control characters are escaped")
    }

    @Test func aChannelTemplateRenderingPastItsLimitIsADeadLetter() throws {
        let router = try Self.router { $0.channelID = "x{{long}}" }
        let reason = try deadLetter(router, #"{"long":"\#(String(repeating: "A", count: 400))"}"#)
        #expect(
            reason?.description == "route scores: channel_id: rendered more than 256 bytes; a channel ID is at most 256"
        )
    }

    @Test func aBroadcastRouteMustUseLiveActivity() {
        let errors = compileErrors([Self.spec { $0.pushType = "alert" }])
        #expect(errors.map(\.keyPath) == ["push_type"], "\(errors)")
        #expect(errors.first?.message.contains("must use push_type liveactivity, not alert") == true)
        #expect(errors.first?.hint?.contains("push_type: liveactivity") == true)
    }

    @Test func deviceTokensAndChannelIDExcludeEachOther() {
        let errors = compileErrors([Self.spec { $0.deviceTokens = "{{token}}" }])
        #expect(errors.map(\.code) == [.conflictingFields], "\(errors)")
        #expect(errors.first?.keyPath == "channel_id")
        #expect(errors.first?.message == "both device_tokens and channel_id are given")
    }

    @Test func aBroadcastRouteCannotSetACollapseID() {
        let errors = compileErrors([Self.spec { $0.collapseID = "game-1" }])
        #expect(errors.map(\.keyPath) == ["collapse_id"], "\(errors)")
        #expect(errors.first?.hint?.contains("no apns-collapse-id") == true)
    }

    @Test(arguments: [
        ("", "channel_id is empty"), ("not base64!", "is not a channel ID (BadChannelId)"), ("{{a", "line 1"),
    ])
    func aChannelIDThatCanNeverWorkIsAConfigurationError(channel: String, fragment: String) {
        let errors = compileErrors([Self.spec { $0.channelID = channel }])
        #expect(errors.map(\.keyPath) == ["channel_id"], "\(errors)")
        #expect(errors.first?.message.contains(fragment) == true, "\(errors)")
    }

    @Test func aDeviceRouteStillNeedsItsTokens() {
        let errors = compileErrors([Self.spec { $0.channelID = nil }])
        #expect(errors.map(\.keyPath) == ["device_tokens"], "\(errors)")
    }
}
