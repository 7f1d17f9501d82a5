import CopyOnWrite
import Foundation

/// One APNs request, fully resolved: what the mapper produces from an event and what the client sends.
///
/// Values are taken as given; ``NotificationValidation`` (in this module) checks them against Apple's rules
/// and answers with the reason APNs itself would give, so a local fault and a remote one look the same
/// downstream.
package struct Notification: Sendable, Hashable {
    /// The fields, in one object shared by every copy until one is changed: a notification is copied at every layer
    /// on its way (route, pipeline, sender, client).
    private var storage: CopyOnWrite<Fields>

    /// The device token, hex, as it goes into `/3/device/<token>`; empty for a broadcast (see ``channelID``).
    package var deviceToken: String {
        get { self.storage.value.deviceToken }
        set { self.storage.value.deviceToken = newValue }
    }
    /// The broadcast channel (iOS 18 Live Activities), base64, as it goes into `apns-channel-id`; `nil` for a
    /// device notification. When set, the notification is Apple's broadcast request
    /// (`POST /4/broadcasts/apps/<bundle ID>`, see ``path``) and ``deviceToken`` is empty.
    package var channelID: String? {
        get { self.storage.value.channelID }
        set { self.storage.value.channelID = newValue }
    }
    /// The full `apns-topic`, push-type suffix included (see ``PushType/topic(for:)``).
    package var topic: String {
        get { self.storage.value.topic }
        set { self.storage.value.topic = newValue }
    }
    /// `apns-push-type`.
    package var pushType: PushType {
        get { self.storage.value.pushType }
        set { self.storage.value.pushType = newValue }
    }
    /// `apns-priority`.
    package var priority: Priority {
        get { self.storage.value.priority }
        set { self.storage.value.priority = newValue }
    }
    /// `apns-expiration` in UNIX epoch seconds; `nil` leaves the header out (APNs' storage policy applies),
    /// `0` asks APNs to try once and not store.
    package var expirationEpochSeconds: Int64? {
        get { self.storage.value.expirationEpochSeconds }
        set { self.storage.value.expirationEpochSeconds = newValue }
    }
    /// `apns-collapse-id`, at most 64 bytes; `nil` leaves the header out.
    package var collapseID: String? {
        get { self.storage.value.collapseID }
        set { self.storage.value.collapseID = newValue }
    }
    /// `apns-id`: sent so that an outcome and Apple's logs name the same notification.
    package var id: UUID {
        get { self.storage.value.id }
        set {
            self.storage.value.id = newValue
            self.storage.value.apnsID = newValue.lowercasedString
        }
    }
    /// `apns-id` as APNs wants it: the canonical UUID form, lowercase. Kept with ``id``: the request and the
    /// outcome both need it, and writing it each time made a string per use.
    package var apnsID: String { self.storage.value.apnsID }
    /// The payload: the UTF-8 bytes of one JSON object.
    package var payload: [UInt8] {
        get { self.storage.value.payload }
        set { self.storage.value.payload = newValue }
    }
    /// Whether the request goes ahead of others waiting for a free HTTP/2 stream on its connection (a lane with
    /// `expedite: true`, docs/configuration.md "Lanes"). Nothing of it is sent to APNs.
    package var expedited: Bool {
        get { self.storage.value.expedited }
        set { self.storage.value.expedited = newValue }
    }

    /// Creates a notification; `priority` defaults to the push type's default. With `channelID` it is a broadcast
    /// to that channel (`deviceToken` is then ignored: pass `""`).
    package init(
        deviceToken: String,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expirationEpochSeconds: Int64? = nil,
        collapseID: String? = nil,
        id: UUID,
        payload: [UInt8],
        channelID: String? = nil
    ) {
        self.storage = CopyOnWrite(
            Fields(
                deviceToken: deviceToken,
                channelID: channelID,
                topic: topic,
                pushType: pushType,
                priority: priority ?? pushType.defaultPriority,
                expirationEpochSeconds: expirationEpochSeconds,
                collapseID: collapseID,
                id: id,
                apnsID: id.lowercasedString,
                payload: payload,
                expedited: false
            ))
    }

    package static func == (lhs: Notification, rhs: Notification) -> Bool {
        lhs.storage.isSharing(with: rhs.storage) || lhs.storage.value == rhs.storage.value
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.storage.value)
    }

    private struct Fields: Hashable {
        var deviceToken: String
        var channelID: String?
        var topic: String
        var pushType: PushType
        var priority: Priority
        var expirationEpochSeconds: Int64?
        var collapseID: String?
        var id: UUID
        var apnsID: String
        var payload: [UInt8]
        var expedited: Bool
    }
}

extension UUID {
    /// The canonical form in lowercase hex (`8b4c2a1e-…`), written directly: `uuidString` formats through
    /// `sprintf` and `lowercased()` copies it again, on every notification.
    package var lowercasedString: String {
        withUnsafeBytes(of: self.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                let digits: StaticString = "0123456789abcdef"
                var position = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        buffer[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    buffer[position] = digits.utf8Start[Int(byte >> 4)]
                    buffer[position + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    position += 2
                }
                return position
            }
        }
    }
}

extension Notification {
    /// The largest payload APNs accepts for this notification, in bytes: the push type's
    /// (``PushType/maxPayloadBytes``), or for a broadcast ``NotificationValidation/maximumBroadcastPayloadBytes``.
    package var maxPayloadBytes: Int {
        self.channelID == nil ? self.pushType.maxPayloadBytes : NotificationValidation.maximumBroadcastPayloadBytes
    }

    /// Whether this is a broadcast to ``channelID`` rather than a push to one device.
    @inlinable
    public var isBroadcast: Bool { self.channelID != nil }

    /// The bundle ID of the app: ``topic`` without its push type's suffix. A broadcast names the app by it in
    /// its path (`/4/broadcasts/apps/<bundle ID>`).
    package var bundleID: Substring {
        let suffix = self.pushType.topicSuffix
        guard !suffix.isEmpty, self.topic.hasSuffix(suffix) else { return self.topic[...] }
        return self.topic.dropLast(suffix.count)
    }

    /// What the notification is sent to, for logs: the first 8 characters of the device token (docs/operations.md, "Guarantees"), or the
    /// whole channel ID of a broadcast (a channel is not personal data, and its whole ID is what
    /// `pushbridge channels` and Apple's tools name).
    package var destinationForLog: String {
        if let channelID = self.channelID { return channelID }
        return String(self.deviceToken.prefix(8))
    }
}
