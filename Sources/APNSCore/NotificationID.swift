import Foundation

/// Deterministic notification ids (`apns-id`, outcome `notification_id`): the same source coordinates always
/// give the same id, so an event processed again after a crash produces outcomes consumers can de-duplicate
/// (docs/operations.md, "Guarantees").
///
/// The id is a name-based UUID version 5 (RFC 9562 §5.5: SHA-1 of a namespace and a name, truncated to 128
/// bits with the version and variant bits set), so any UUID library recomputes it from the coordinates. The
/// name is `<topic>/<partition>/<offset>/<route>/<token index>`. Kafka topic names cannot contain `/`, and
/// only the route (last but one) may, so no two coordinate sets share a name. The route is part of the name
/// because two routes that match the same event both fan out from token index 0; without it their
/// notifications would share an id.
package enum NotificationID {
    /// The namespace of PushBridge notification ids (itself a fixed random UUID).
    package static let namespace = UUID(
        uuid: (0x6f, 0x1d, 0x4e, 0x52, 0x8a, 0x3b, 0x4c, 0x0e, 0x9d, 0x27, 0x5b, 0xe1, 0x40, 0x8c, 0x72, 0xa9))

    /// The id of the notification for token `tokenIndex` that `route` made of the event at
    /// `topic`/`partition`/`offset`.
    package static func make(topic: String, partition: Int32, offset: Int64, route: String, tokenIndex: Int) -> UUID {
        // This runs once per notification: the name is written into a stack buffer and hashed there.
        let capacity = 16 + topic.utf8.count + route.utf8.count + 3 * 20 + 4
        let words = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var count = 0
            func append(_ byte: UInt8) {
                buffer[count] = byte
                count += 1
            }
            func append(_ text: String) {
                text.withUTF8InPlace { utf8 in
                    let destination = UnsafeMutableBufferPointer(rebasing: buffer[count..<(count + utf8.count)])
                    _ = destination.initialize(fromContentsOf: utf8)
                    count += utf8.count
                }
            }
            withUnsafeBytes(of: Self.namespace.uuid) { $0.forEach(append) }
            append(topic)
            append(UInt8(ascii: "/"))
            Self.appendDecimal(Int64(partition), append)
            append(UInt8(ascii: "/"))
            Self.appendDecimal(offset, append)
            append(UInt8(ascii: "/"))
            append(route)
            append(UInt8(ascii: "/"))
            Self.appendDecimal(Int64(tokenIndex), append)
            return SHA1.digestWords(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count))
        }
        let a = words.0.bigEndian
        let b = words.1.bigEndian
        let c = words.2.bigEndian
        let d = words.3.bigEndian
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { bytes in
            bytes.storeBytes(of: a, toByteOffset: 0, as: UInt32.self)
            bytes.storeBytes(of: b, toByteOffset: 4, as: UInt32.self)
            bytes.storeBytes(of: c, toByteOffset: 8, as: UInt32.self)
            bytes.storeBytes(of: d, toByteOffset: 12, as: UInt32.self)
            bytes[6] = (bytes[6] & 0x0F) | 0x50  // version 5
            bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        }
        return UUID(uuid: uuid)
    }

    private static func appendDecimal(_ value: Int64, _ append: (UInt8) -> Void) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var divisor: UInt64 = 1
        while value.magnitude / divisor >= 10 { divisor *= 10 }
        var rest = value.magnitude
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}
