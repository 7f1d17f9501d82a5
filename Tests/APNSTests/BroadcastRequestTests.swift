import APNSCore
import Foundation
import Testing

/// How a broadcast notification goes on the wire (Apple: *Sending broadcast push notification requests to APNs*),
/// and the local checks of its channel ID.
@Suite("Broadcast requests")
struct BroadcastRequestTests {
    static let channel = "dHN0LXNyY2gtY2hubA=="
    static let id = UUID(uuidString: "8B4C2A1E-1111-4222-9333-444455556666")!

    func broadcast(
        channel: String = Self.channel, pushType: PushType = .liveactivity, expiration: Int64? = nil,
        payload: [UInt8] = Array(#"{"aps":{"event":"update"}}"#.utf8)
    ) -> APNSCore.Notification {
        APNSCore.Notification(
            deviceToken: "", topic: pushType.topic(for: "com.example.app"), pushType: pushType,
            priority: .powerConsiderate,
            expirationEpochSeconds: expiration, id: Self.id, payload: payload, channelID: channel)
    }

    @Test("the path names the bundle ID, and the headers are Apple's broadcast headers, without apns-topic")
    func pathAndHeaders() {
        let notification = self.broadcast()
        #expect(notification.isBroadcast)
        #expect(notification.path == "/4/broadcasts/apps/com.example.app")
        let headers = notification.apnsHeaders.map { "\($0.name): \($0.value)" }
        #expect(
            headers == [
                "apns-push-type: liveactivity",
                "apns-priority: 5",
                "apns-request-id: 8b4c2a1e-1111-4222-9333-444455556666",
                "apns-expiration: 0",
                "apns-channel-id: dHN0LXNyY2gtY2hubA==",
            ])
    }

    @Test("a broadcast's expiration is sent as given; none is sent as 0 (the header is required)")
    func expiration() {
        let stored = self.broadcast(expiration: 1_900_000_000).apnsHeaders
        #expect(stored.first { $0.name == "apns-expiration" }?.value == "1900000000")
        #expect(self.broadcast().apnsHeaders.filter { $0.name == "apns-expiration" }.map(\.value) == ["0"])
    }

    @Test("a device notification is unchanged: /3/device/<token>, apns-topic, apns-id, no channel header")
    func deviceUnchanged() {
        let notification = APNSCore.Notification(
            deviceToken: String(repeating: "ab", count: 32), topic: "com.example.app", pushType: .alert,
            id: Self.id, payload: Array("{}".utf8))
        #expect(!notification.isBroadcast)
        #expect(notification.path == "/3/device/" + String(repeating: "ab", count: 32))
        #expect(
            notification.apnsHeaders.map(\.name) == ["apns-push-type", "apns-topic", "apns-priority", "apns-id"])
        #expect(notification.destinationForLog == "abababab")
        #expect(self.broadcast().destinationForLog == Self.channel)
    }

    @Test(
        "channel IDs that cannot be Apple's are refused with its reasons",
        arguments: [
            ("", Reason.missingChannelId),
            ("abc", .badChannelId),  // not a multiple of four
            ("ab\ncd==", .badChannelId),  // control character
            ("ab cd===", .badChannelId),
            ("hello world!", .badChannelId),
            ("====", .badChannelId),
            ("ab=c", .badChannelId),  // data after padding
            ("a===", .badChannelId),
            ("w6TDtsO8", nil),  // valid base64 of non-ASCII bytes
            (String(repeating: "AAAA", count: 64), nil),  // 256 bytes
            (String(repeating: "AAAA", count: 65), .badChannelId),  // 260 bytes
            ("dHN0LXNyY2gtY2hubA==", nil),
            ("dHN0LXNyY2gtY2hubA+/", nil),
        ])
    func channelIDs(channel: String, expected: Reason?) {
        #expect(NotificationValidation.validateChannelID(channel) == expected)
        #expect(NotificationValidation.validate(self.broadcast(channel: channel)) == expected)
        #expect(NotificationValidation.validateHeaderValues(self.broadcast(channel: channel)) == expected)
    }

    @Test("a broadcast must be a liveactivity push, and its payload may be 5120 bytes")
    func pushTypeAndPayload() {
        #expect(NotificationValidation.validate(self.broadcast(pushType: .alert)) == .invalidPushType)
        func payload(_ size: Int) -> [UInt8] {
            let prefix = Array(#"{"aps":{},"x":""#.utf8)
            return prefix + Array(repeating: UInt8(ascii: "a"), count: size - prefix.count - 2) + Array(#""}"#.utf8)
        }
        #expect(payload(5120).count == 5120)
        #expect(NotificationValidation.validate(self.broadcast(payload: payload(5120))) == nil)
        #expect(NotificationValidation.validate(self.broadcast(payload: payload(5121))) == .payloadTooLarge)
        #expect(self.broadcast().maxPayloadBytes == 5120)
    }
}
