import Crypto
import Foundation

/// Deterministic notification ids (`apns-id`, outcome `notification_id`): the same source coordinates always
/// give the same id, so an event processed again after a crash produces outcomes consumers can de-duplicate
/// (SPEC §4).
///
/// The id is a name-based UUID version 5 (RFC 9562 §5.5: SHA-1 of a namespace and a name, truncated to 128
/// bits with the version and variant bits set). The name is
/// `<topic>/<partition>/<offset>/<route>/<token index>`. Kafka topic names cannot contain `/`, and the route
/// is last but one, so no two coordinate sets share a name. The route is part of the name because two routes
/// that match the same event fan out to token index 0 alike; without it their notifications would share an id.
public enum NotificationID {
    /// The namespace of PushBridge notification ids (itself a fixed random UUID).
    public static let namespace = UUID(
        uuid: (
            0x6f, 0x1d, 0x4e, 0x52, 0x8a, 0x3b, 0x4c, 0x0e, 0x9d, 0x27, 0x5b, 0xe1, 0x40, 0x8c, 0x72, 0xa9
        ))

    /// The id of the notification for token `tokenIndex` that `route` made of the event at
    /// `topic`/`partition`/`offset`.
    public static func make(topic: String, partition: Int32, offset: Int64, route: String, tokenIndex: Int) -> UUID {
        var hasher = Insecure.SHA1()
        withUnsafeBytes(of: Self.namespace.uuid) { hasher.update(bufferPointer: $0) }
        // The name is fed piece by piece: this runs once per notification, and building the joined string
        // would cost more than hashing it.
        func feed(_ text: String) {
            var text = text
            text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }
        feed(topic)
        feed("/")
        feed(String(partition))
        feed("/")
        feed(String(offset))
        feed("/")
        feed(route)
        feed("/")
        feed(String(tokenIndex))
        let digest = hasher.finalize()
        return digest.withUnsafeBytes { raw in
            var bytes = (
                raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]
            )
            bytes.6 = (bytes.6 & 0x0F) | 0x50  // version 5
            bytes.8 = (bytes.8 & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: bytes)
        }
    }
}
