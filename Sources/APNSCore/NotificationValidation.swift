import Foundation

/// Apple's request rules, checked locally, each answering with the ``Reason`` APNs itself would give.
///
/// The client runs ``validate(_:)`` before sending, so a fault it can see costs no request and looks the
/// same downstream as APNs' own answer; the simulator runs the per-field checks on the raw header values it
/// receives (Apple: *Sending notification requests to APNs*).
public enum NotificationValidation {
    /// The shortest device token accepted, in hex characters (32 bytes, today's token size).
    public static let minimumDeviceTokenCharacters = 64
    /// The longest device token accepted, in hex characters. Apple warns not to assume a token size, so
    /// this leaves room for growth while still catching garbage.
    public static let maximumDeviceTokenCharacters = 200
    /// The longest `apns-collapse-id`, in bytes.
    public static let maximumCollapseIDBytes = 64

    /// Checks every field of `notification`; `nil` when APNs would accept it.
    public static func validate(_ notification: Notification) -> Reason? {
        if let reason = self.validateDeviceToken(notification.deviceToken) { return reason }
        if let reason = self.validateTopic(notification.topic, pushType: notification.pushType) { return reason }
        if !notification.pushType.allows(notification.priority) { return .badPriority }
        if let expiration = notification.expirationEpochSeconds, expiration < 0 { return .badExpirationDate }
        if let collapseID = notification.collapseID, let reason = self.validateCollapseID(collapseID) {
            return reason
        }
        return self.validatePayload(notification.payload, pushType: notification.pushType)
    }

    /// The device token in `/3/device/<token>`: hex digits, an even count, 64 to 200 of them.
    public static func validateDeviceToken(_ token: some StringProtocol) -> Reason? {
        if token.isEmpty { return .missingDeviceToken }
        let count = token.utf8.count
        guard count % 2 == 0, count >= self.minimumDeviceTokenCharacters, count <= self.maximumDeviceTokenCharacters
        else { return .badDeviceToken }
        for byte in token.utf8 where !Self.isHexDigit(byte) {
            return .badDeviceToken
        }
        return nil
    }

    /// `apns-topic` against the push type: present, and carrying the suffix the push type requires after a
    /// non-empty bundle ID (`com.example.app.voip` for `voip`).
    public static func validateTopic(_ topic: String, pushType: PushType) -> Reason? {
        if topic.isEmpty { return .missingTopic }
        let suffix = pushType.topicSuffix
        if !suffix.isEmpty && (!topic.hasSuffix(suffix) || topic.utf8.count == suffix.utf8.count) {
            return .badTopic
        }
        return nil
    }

    /// A raw `apns-push-type` header value: one of the known push types.
    public static func validatePushType(_ value: String) -> Reason? {
        PushType(rawValue: value) == nil ? .invalidPushType : nil
    }

    /// A raw `apns-priority` header value: `1`, `5` or `10`, and allowed for the push type.
    public static func validatePriority(_ value: String, pushType: PushType) -> Reason? {
        guard let number = Int(value), let priority = Priority(rawValue: number), pushType.allows(priority) else {
            return .badPriority
        }
        return nil
    }

    /// A raw `apns-expiration` header value: UNIX epoch seconds, `0` or more.
    public static func validateExpiration(_ value: String) -> Reason? {
        guard let seconds = Int64(value), seconds >= 0 else { return .badExpirationDate }
        return nil
    }

    /// A raw `apns-id` header value: a canonical UUID, 8-4-4-4-12 hex digits, lowercase.
    public static func validateMessageID(_ value: String) -> Reason? {
        let bytes = Array(value.utf8)
        guard bytes.count == 36 else { return .badMessageId }
        for (index, byte) in bytes.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                if byte != UInt8(ascii: "-") { return .badMessageId }
            default:
                let isLowerHex =
                    (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                if !isLowerHex { return .badMessageId }
            }
        }
        return nil
    }

    /// A raw `apns-collapse-id`: at most 64 bytes.
    public static func validateCollapseID(_ value: String) -> Reason? {
        value.utf8.count > self.maximumCollapseIDBytes ? .badCollapseId : nil
    }

    /// The payload: not empty, within the push type's size limit, and one JSON object.
    ///
    /// Apple documents no reason for a body that is not a JSON object; it carries no notification, so it is
    /// answered like an empty one (`PayloadEmpty`).
    public static func validatePayload(_ payload: [UInt8], pushType: PushType) -> Reason? {
        if payload.isEmpty { return .payloadEmpty }
        if payload.count > pushType.maxPayloadBytes { return .payloadTooLarge }
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)), object is [String: Any] else {
            return .payloadEmpty
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}
