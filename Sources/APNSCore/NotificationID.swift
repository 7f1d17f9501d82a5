import Foundation

/// Deterministic notification ids (`apns-id`, outcome `notification_id`): the same source coordinates always
/// give the same id, so an event processed again after a crash produces outcomes consumers can de-duplicate
/// (SPEC §4).
///
/// The id is a name-based UUID version 5 (RFC 9562 §5.5: SHA-1 of a namespace and a name, truncated to 128
/// bits with the version and variant bits set), so any UUID library recomputes it from the coordinates. The
/// name is `<topic>/<partition>/<offset>/<route>/<token index>`. Kafka topic names cannot contain `/`, and
/// only the route (last but one) may, so no two coordinate sets share a name. The route is part of the name
/// because two routes that match the same event both fan out from token index 0; without it their
/// notifications would share an id.
public enum NotificationID {
    /// The namespace of PushBridge notification ids (itself a fixed random UUID).
    public static let namespace = UUID(
        uuid: (0x6f, 0x1d, 0x4e, 0x52, 0x8a, 0x3b, 0x4c, 0x0e, 0x9d, 0x27, 0x5b, 0xe1, 0x40, 0x8c, 0x72, 0xa9))

    /// The id of the notification for token `tokenIndex` that `route` made of the event at
    /// `topic`/`partition`/`offset`.
    public static func make(topic: String, partition: Int32, offset: Int64, route: String, tokenIndex: Int) -> UUID {
        // This runs once per notification: the name goes into one buffer, then one hash, without Strings.
        var message: [UInt8] = []
        message.reserveCapacity(16 + topic.utf8.count + route.utf8.count + 48)
        withUnsafeBytes(of: Self.namespace.uuid) { message.append(contentsOf: $0) }
        message.append(contentsOf: topic.utf8)
        message.append(UInt8(ascii: "/"))
        Self.appendDecimal(Int64(partition), to: &message)
        message.append(UInt8(ascii: "/"))
        Self.appendDecimal(offset, to: &message)
        message.append(UInt8(ascii: "/"))
        message.append(contentsOf: route.utf8)
        message.append(UInt8(ascii: "/"))
        Self.appendDecimal(Int64(tokenIndex), to: &message)
        let digest = message.withUnsafeBytes(SHA1.digest)
        return UUID(
            uuid: (
                digest[0], digest[1], digest[2], digest[3], digest[4], digest[5],
                (digest[6] & 0x0F) | 0x50,  // version 5
                digest[7],
                (digest[8] & 0x3F) | 0x80,  // RFC 9562 variant
                digest[9], digest[10], digest[11], digest[12], digest[13], digest[14], digest[15]
            ))
    }

    private static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }
}
