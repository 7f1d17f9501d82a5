import Foundation

/// Apple's request rules, checked locally, each answering with the ``Reason`` APNs itself would give.
///
/// The client runs ``validate(_:)`` before sending, so a fault it can see costs no request and looks the
/// same downstream as APNs' own answer; the simulator runs the per-field checks on the raw header values it
/// receives (Apple: *Sending notification requests to APNs*).
package enum NotificationValidation {
    /// The shortest device token accepted, in hex characters (32 bytes, today's token size).
    package static let minimumDeviceTokenCharacters = 64
    /// The longest device token accepted, in hex characters. Apple warns not to assume a token size, so
    /// this leaves room for growth while still catching garbage.
    package static let maximumDeviceTokenCharacters = 200
    /// The longest `apns-collapse-id`, in bytes.
    package static let maximumCollapseIDBytes = 64

    /// Checks every field of `notification`; `nil` when APNs would accept it.
    ///
    /// - Parameter payloadIsJSONObject: the caller made the payload as a JSON object itself (the router writes
    ///   every payload from an object template or a parsed object), so only its size is checked; otherwise it is
    ///   parsed, which costs more than every other check together.
    ///
    /// A broadcast (``Notification/channelID`` set) is checked for its channel ID (``validateChannelID(_:)``)
    /// instead of a device token, must be a `liveactivity` push (else `InvalidPushType`: Apple broadcasts Live
    /// Activity updates only), and may carry up to ``maximumBroadcastPayloadBytes``.
    package static func validate(_ notification: Notification, payloadIsJSONObject: Bool = false) -> Reason? {
        if let channelID = notification.channelID {
            if let reason = self.validateChannelID(channelID) { return reason }
            if notification.pushType != .liveactivity { return .invalidPushType }
        } else if let reason = self.validateDeviceToken(notification.deviceToken) {
            return reason
        }
        if let reason = self.validateFields(notification) { return reason }
        return self.validatePayload(
            notification.payload, limit: notification.maxPayloadBytes, isJSONObject: payloadIsJSONObject)
    }

    /// The largest broadcast payload, in bytes: "the payload is limited to a maximum size of 5 KB (5,120 bytes)"
    /// (Apple: *Sending broadcast push notification requests to APNs*).
    package static let maximumBroadcastPayloadBytes = 5120
    /// The longest channel ID accepted, in bytes. Apple says not to assume their size (they are 16 random bytes
    /// in base64 today, 24 characters); this leaves room for growth while catching garbage, and is the bound
    /// the channel management client applies to the IDs APNs hands out.
    package static let maximumChannelIDBytes = 256

    /// A channel ID for `apns-channel-id`: `MissingChannelId` when empty; `BadChannelId` when longer than
    /// ``maximumChannelIDBytes`` or not base64 (Apple: "a base64-encoded string"; padded, standard alphabet),
    /// which also keeps control characters, spaces and non-ASCII out of the header.
    package static func validateChannelID(_ channelID: String) -> Reason? {
        return channelID.withUTF8InPlace { bytes in
            if bytes.isEmpty { return .missingChannelId }
            guard bytes.count <= self.maximumChannelIDBytes, bytes.count % 4 == 0 else { return .badChannelId }
            var padding = 0
            for byte in bytes {
                if byte == UInt8(ascii: "=") {
                    padding += 1
                    continue
                }
                // A data character after padding, or one outside the alphabet.
                guard padding == 0, Self.isBase64Character(byte) else { return .badChannelId }
            }
            return padding <= 2 ? nil : .badChannelId
        }
    }

    private static func isBase64Character(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "/")
    }

    /// Topic, priority, expiration and collapse id, in that order: the checks ``validate(_:payloadIsJSONObject:)``
    /// and ``validateHeaderValues(_:)`` share.
    private static func validateFields(_ notification: Notification) -> Reason? {
        if let reason = self.validateTopic(notification.topic, pushType: notification.pushType) { return reason }
        if !notification.pushType.allows(notification.priority) { return .badPriority }
        return self.validateEventFields(
            expirationEpochSeconds: notification.expirationEpochSeconds, collapseID: notification.collapseID)
    }

    /// Expiration, then collapse id: the part of ``validate(_:payloadIsJSONObject:)``'s field checks that an event
    /// gives every notification made from it (topic and priority are the route's). The mapper runs it once per
    /// event; ``validate(_:payloadIsJSONObject:)`` runs it after topic and priority, so both report the same fault
    /// first.
    package static func validateEventFields(expirationEpochSeconds: Int64?, collapseID: String?) -> Reason? {
        if let expiration = expirationEpochSeconds, expiration < 0 { return .badExpirationDate }
        if let collapseID, let reason = self.validateCollapseID(collapseID) { return reason }
        return nil
    }

    /// The checks of ``validate(_:)`` that do not depend on the device token's format or on the payload: what
    /// goes into a header (or the `:path`) must be a value HTTP/2 can carry, and the collapse id must fit.
    ///
    /// The mapper runs this on every notification it makes (it is a few byte comparisons), so a value rendered
    /// from an event that could never be sent is marked before it reaches the pipeline, and `pushbridge render`
    /// shows it. Token *format* (hex, 64 to 200 digits) is left to ``validate(_:)``, run before sending.
    ///
    /// - Returns: `BadDeviceToken` for a token with a character outside visible ASCII or longer than
    ///   ``maximumDeviceTokenCharacters``, then what ``validateTopic(_:pushType:)``, the priority and
    ///   expiration rules and ``validateCollapseID(_:)`` answer, in that order; `nil` when none applies.
    package static func validateHeaderValues(_ notification: Notification) -> Reason? {
        if let channelID = notification.channelID {
            if let reason = self.validateChannelID(channelID) { return reason }
        } else if let reason = self.validateDeviceTokenCharacters(notification.deviceToken) {
            return reason
        }
        return self.validateFields(notification)
    }

    /// Whether `value` can be sent as an HTTP/2 header value to APNs: visible ASCII and spaces only
    /// (0x20-0x7E), and no space at either end.
    ///
    /// Control characters (CR and LF above all) could split or corrupt the request, and HPACK would carry them
    /// to a server that resets the stream, which looks like a transient fault and is retried. Leading or
    /// trailing spaces are refused too: RFC 9113 §8.2.1 forbids them in field values and nghttp2 servers
    /// reset such streams in the same way. Bytes above 0x7E (UTF-8) are refused because Apple documents none
    /// of its header values as anything but ASCII. The empty string passes.
    package static func isHeaderValue(_ value: some StringProtocol) -> Bool {
        if let answer = value.utf8.withContiguousStorageIfAvailable(Self.isHeaderValue(utf8:)) { return answer }
        return Array(value.utf8).withUnsafeBufferPointer(Self.isHeaderValue(utf8:))
    }

    /// ``isHeaderValue(_:)-(StringProtocol)`` for a `String`, reading its UTF-8 in place: this runs on every
    /// notification the mapper makes.
    package static func isHeaderValue(_ value: String) -> Bool {
        return value.withUTF8InPlace(Self.isHeaderValue(utf8:))
    }

    private static func isHeaderValue(utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = utf8.baseAddress, let first = utf8.first, let last = utf8.last else { return true }
        if first == 0x20 || last == 0x20 { return false }
        // Eight bytes at a time (the mapper checks every notification's token and collapse id): a byte below
        // 0x20 sets its high bit in `(word - 0x20…) & ~word`, a byte above 0x7E in `(word + 0x01…) | word`.
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var position = 0
        while utf8.count - position >= 8 {
            let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
            let below = (word &- ones &* 0x20) & ~word
            let above = (word &+ ones) | word
            if (below | above) & highs != 0 { return false }
            position += 8
        }
        while position < utf8.count {
            // One wrapping comparison: anything below 0x20 wraps above 0x5E, and 0x7F and up stay above.
            if utf8[position] &- 0x20 > 0x5E { return false }
            position += 1
        }
        return true
    }

    /// What of a device token can be checked without knowing its format: that it can go into `:path` (see
    /// ``isHeaderValue(_:)-(String)``) and is at most ``maximumDeviceTokenCharacters`` long; else
    /// `BadDeviceToken`.
    package static func validateDeviceTokenCharacters(_ token: String) -> Reason? {
        token.utf8.count > self.maximumDeviceTokenCharacters || !self.isHeaderValue(token) ? .badDeviceToken : nil
    }

    /// The device token in `/3/device/<token>`: hex digits, an even count, 64 to 200 of them.
    package static func validateDeviceToken(_ token: some StringProtocol) -> Reason? {
        // The bytes in place: a generic walk over `utf8` from another module was a tenth of the simulator's time.
        if let answer = token.utf8.withContiguousStorageIfAvailable(Self.validateDeviceToken(utf8:)) { return answer }
        return Array(token.utf8).withUnsafeBufferPointer(Self.validateDeviceToken(utf8:))
    }

    private static func validateDeviceToken(utf8 token: UnsafeBufferPointer<UInt8>) -> Reason? {
        if token.isEmpty { return .missingDeviceToken }
        guard token.count % 2 == 0, token.count >= self.minimumDeviceTokenCharacters,
            token.count <= self.maximumDeviceTokenCharacters
        else { return .badDeviceToken }
        // Without an early exit, so that the compiler can check many bytes at once: this runs for every request.
        var invalid: UInt8 = 0
        for byte in token {
            let digit: UInt8 = byte &- UInt8(ascii: "0") < 10 ? 1 : 0
            // `| 0x20` folds "A"–"F" onto "a"–"f" (and nothing else onto them).
            let letter: UInt8 = (byte | 0x20) &- UInt8(ascii: "a") < 6 ? 1 : 0
            invalid |= (digit | letter) ^ 1
        }
        return invalid == 0 ? nil : .badDeviceToken
    }

    /// `apns-topic` against the push type: present, and carrying the suffix the push type requires after a
    /// non-empty bundle ID (`com.example.app.voip` for `voip`).
    /// A topic with a character outside visible ASCII (see ``isHeaderValue(_:)``) is `BadTopic`.
    package static func validateTopic(_ topic: String, pushType: PushType) -> Reason? {
        if topic.isEmpty { return .missingTopic }
        if !self.isHeaderValue(topic) { return .badTopic }
        let suffix = pushType.topicSuffix
        if !suffix.isEmpty && (!topic.hasSuffix(suffix) || topic.utf8.count == suffix.utf8.count) {
            return .badTopic
        }
        return nil
    }

    /// A raw `apns-push-type` header value: one of the known push types.
    package static func validatePushType(_ value: String) -> Reason? {
        PushType(rawValue: value) == nil ? .invalidPushType : nil
    }

    /// A raw `apns-priority` header value: `1`, `5` or `10` exactly, and allowed for the push type.
    package static func validatePriority(_ value: String, pushType: PushType) -> Reason? {
        guard value.utf8.count <= 2, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let number = Int(value), let priority = Priority(rawValue: number), pushType.allows(priority)
        else {
            return .badPriority
        }
        return nil
    }

    /// A raw `apns-expiration` header value: UNIX epoch seconds, `0` or more, as decimal digits only (no
    /// sign, no spaces) that fit in 64 bits.
    package static func validateExpiration(_ value: String) -> Reason? {
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            Int64(value) != nil
        else { return .badExpirationDate }
        return nil
    }

    /// A raw `apns-id` header value: a canonical UUID, 8-4-4-4-12 hex digits, lowercase.
    package static func validateMessageID(_ value: String) -> Reason? {
        return value.withUTF8InPlace(Self.validateMessageID(utf8:))
    }

    private static func validateMessageID(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Reason? {
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

    /// A raw `apns-collapse-id`: at most 64 bytes, visible ASCII and spaces only (see ``isHeaderValue(_:)``).
    package static func validateCollapseID(_ value: String) -> Reason? {
        value.utf8.count > self.maximumCollapseIDBytes || !self.isHeaderValue(value) ? .badCollapseId : nil
    }

    /// The payload: not empty, within the push type's size limit, and one JSON object.
    ///
    /// Apple documents no reason for a body that is not a JSON object; it carries no notification, so it is
    /// answered like an empty one (`PayloadEmpty`). With `isJSONObject` the caller wrote the payload as an
    /// object itself, and only emptiness and size are checked.
    package static func validatePayload(_ payload: [UInt8], pushType: PushType, isJSONObject: Bool = false) -> Reason? {
        self.validatePayload(payload, limit: pushType.maxPayloadBytes, isJSONObject: isJSONObject)
    }

    /// ``validatePayload(_:pushType:isJSONObject:)`` with the size limit given in bytes (a broadcast's is
    /// ``maximumBroadcastPayloadBytes``, see ``Notification/maxPayloadBytes``).
    package static func validatePayload(_ payload: [UInt8], limit: Int, isJSONObject: Bool = false) -> Reason? {
        if payload.isEmpty { return .payloadEmpty }
        if payload.count > limit { return .payloadTooLarge }
        if isJSONObject { return nil }
        // The common case without building Foundation objects; the rest gets JSONSerialization's own verdict.
        if payload.withUnsafeBufferPointer(PayloadSyntax.isPlainObject) { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)), object is [String: Any] else {
            return .payloadEmpty
        }
        return nil
    }
}
