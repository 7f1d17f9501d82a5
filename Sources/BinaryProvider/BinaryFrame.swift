import APNSCore

/// Which of Apple's binary provider formats a connection writes (Apple archive, *Binary Provider API* and
/// *Legacy Notification Format*).
package enum BinaryFormat: String, Sendable, Hashable, CaseIterable {
    /// Command 2: a frame of items (token, payload, identifier, expiration, priority). Error responses name
    /// the notification by its identifier.
    case framed
    /// Command 1: identifier and expiry in fixed fields. Error responses name the identifier.
    case enhanced
    /// Command 0: token and payload only. The gateway never answers; it only closes the connection, so a
    /// failure cannot be pinned on one notification.
    case simple

    /// The command byte that starts each notification.
    package var command: UInt8 {
        switch self {
        case .framed: 2
        case .enhanced: 1
        case .simple: 0
        }
    }

    /// Apple's payload limit for the format: 2048 bytes for framed notifications, 256 for the older enhanced and
    /// simple formats (a gateway that took more for them is configured with `binary.payload_limit`).
    package var defaultPayloadLimitBytes: Int {
        self == .framed ? BinaryFrame.framedPayloadLimitBytes : BinaryFrame.legacyPayloadLimitBytes
    }
}

/// Why a notification cannot be written in the binary format: checked before anything is written, like the
/// HTTP/2 path's local validation, so the gateway never sees it.
package struct BinaryFrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The APNs reason the outcome carries.
    package var reason: Reason
    /// What is wrong, for logs (never the token itself).
    package var detail: String

    /// Creates an error.
    package init(reason: Reason, detail: String) {
        self.reason = reason
        self.detail = detail
    }

    package var description: String { "\(self.reason.rawValue): \(self.detail)" }
}

/// Encodes notifications in the binary provider formats, byte for byte as Apple documented them (all
/// integers big-endian).
///
/// - framed (command 2): `02 | frame length (4) | items`, each item `id (1) | length (2) | data`: 1 device
///   token (32 bytes), 2 payload, 3 identifier (4), 4 expiration (4, UNIX seconds), 5 priority (1). The
///   expiration item is left out when the notification has none (the gateway's storage policy applies).
/// - enhanced (command 1): `01 | identifier (4) | expiry (4) | token length (2) | token | payload length (2) |
///   payload`. The format has no "no expiry": a notification without one is written with expiry 0 (try once,
///   do not store).
/// - simple (command 0): `00 | token length (2) | token | payload length (2) | payload`.
package enum BinaryFrame {
    /// Apple's payload limit for framed notifications (the `apns-*` HTTP/2 limits do not apply here).
    package static let framedPayloadLimitBytes = 2048
    /// The limit of the older enhanced and simple formats.
    package static let legacyPayloadLimitBytes = 256
    /// The length of a device token in bytes (64 hex digits).
    package static let deviceTokenBytes = 32

    /// Appends `notification` to `buffer` in `format` with `identifier` (unused by ``BinaryFormat/simple``).
    /// Throws, leaving `buffer` unchanged, when the token is not 32 bytes of hex, the payload is empty or larger
    /// than `payloadLimitBytes`, the expiration does not fit the format's 32 bits, or the priority is one the
    /// format does not have.
    package static func append(
        _ notification: Notification, identifier: UInt32, format: BinaryFormat, payloadLimitBytes: Int,
        to buffer: inout [UInt8]
    ) throws(BinaryFrameError) {
        let token = try Self.tokenBytes(notification.deviceToken)
        let payload = notification.payload
        try Self.checkFields(notification, format: format, payloadLimitBytes: payloadLimitBytes)
        let expiration = try Self.expiration(notification.expirationEpochSeconds)
        switch format {
        case .framed:
            let itemsLength =
                (3 + token.count) + (3 + payload.count) + (3 + 4) + (expiration == nil ? 0 : 3 + 4) + (3 + 1)
            Self.reserve(5 + itemsLength, in: &buffer)
            buffer.append(format.command)
            Self.append(UInt32(itemsLength), to: &buffer)
            Self.appendItem(1, token, to: &buffer)
            Self.appendItem(2, payload, to: &buffer)
            buffer.append(3)
            Self.append(UInt16(4), to: &buffer)
            Self.append(identifier, to: &buffer)
            if let expiration {
                buffer.append(4)
                Self.append(UInt16(4), to: &buffer)
                Self.append(expiration, to: &buffer)
            }
            buffer.append(5)
            Self.append(UInt16(1), to: &buffer)
            buffer.append(UInt8(notification.priority.rawValue))
        case .enhanced:
            Self.reserve(13 + token.count + 2 + payload.count, in: &buffer)
            buffer.append(format.command)
            Self.append(identifier, to: &buffer)
            Self.append(expiration ?? 0, to: &buffer)
            Self.append(UInt16(token.count), to: &buffer)
            buffer.append(contentsOf: token)
            Self.append(UInt16(payload.count), to: &buffer)
            buffer.append(contentsOf: payload)
        case .simple:
            Self.reserve(5 + token.count + payload.count, in: &buffer)
            buffer.append(format.command)
            Self.append(UInt16(token.count), to: &buffer)
            buffer.append(contentsOf: token)
            Self.append(UInt16(payload.count), to: &buffer)
            buffer.append(contentsOf: payload)
        }
    }

    /// Makes room for `count` more bytes, at least doubling the capacity when it grows: `reserveCapacity` with
    /// the exact size reallocates on every call, which made appending many notifications to one buffer (a
    /// sender's burst) quadratic.
    private static func reserve(_ count: Int, in buffer: inout [UInt8]) {
        let needed = buffer.count + count
        if buffer.capacity < needed { buffer.reserveCapacity(max(needed, 2 * buffer.capacity)) }
    }

    /// The fault ``append(_:identifier:format:payloadLimitBytes:to:)`` would throw for `notification`, without
    /// writing: the bridge's local check of a notification for a binary app.
    package static func validate(
        _ notification: Notification, format: BinaryFormat, payloadLimitBytes: Int
    ) -> BinaryFrameError? {
        do {
            _ = try Self.tokenBytes(notification.deviceToken)
            try Self.checkFields(notification, format: format, payloadLimitBytes: payloadLimitBytes)
            _ = try Self.expiration(notification.expirationEpochSeconds)
            return nil
        } catch {
            return error
        }
    }

    private static func checkFields(
        _ notification: Notification, format: BinaryFormat, payloadLimitBytes: Int
    ) throws(BinaryFrameError) {
        guard !notification.payload.isEmpty else {
            throw BinaryFrameError(reason: .payloadEmpty, detail: "the payload is empty")
        }
        guard notification.payload.count <= payloadLimitBytes else {
            throw BinaryFrameError(
                reason: .payloadTooLarge,
                detail:
                    "the payload has \(notification.payload.count) bytes; the binary gateway takes at most \(payloadLimitBytes)"
            )
        }
        if format == .framed, notification.priority == .powerSaving {
            throw BinaryFrameError(
                reason: .badPriority, detail: "priority 1 does not exist in the binary protocol (10 or 5)")
        }
    }

    /// The 32 bytes of a 64-digit hex token (either case).
    package static func tokenBytes(_ hex: String) throws(BinaryFrameError) -> [UInt8] {
        let digits = hex.utf8
        guard digits.count == 2 * Self.deviceTokenBytes else {
            throw BinaryFrameError(
                reason: .badDeviceToken,
                detail: "a device token is \(2 * Self.deviceTokenBytes) hex digits here, not \(digits.count)")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.deviceTokenBytes)
        var high: UInt8?
        for digit in digits {
            guard let value = Self.hexValue(digit) else {
                throw BinaryFrameError(reason: .badDeviceToken, detail: "the device token is not hex")
            }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    /// Lowercase hex of token bytes, as device tokens appear in records.
    package static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func expiration(_ seconds: Int64?) throws(BinaryFrameError) -> UInt32? {
        guard let seconds else { return nil }
        guard let value = UInt32(exactly: seconds) else {
            throw BinaryFrameError(
                reason: .badExpirationDate,
                detail: "expiration \(seconds) does not fit the binary protocol's 32-bit UNIX seconds")
        }
        return value
    }

    private static func appendItem(_ id: UInt8, _ data: [UInt8], to buffer: inout [UInt8]) {
        buffer.append(id)
        Self.append(UInt16(data.count), to: &buffer)
        buffer.append(contentsOf: data)
    }

    static func append(_ value: UInt16, to buffer: inout [UInt8]) {
        buffer.append(UInt8(value >> 8))
        buffer.append(UInt8(value & 0xFF))
    }

    static func append(_ value: UInt32, to buffer: inout [UInt8]) {
        buffer.append(UInt8(value >> 24))
        buffer.append(UInt8((value >> 16) & 0xFF))
        buffer.append(UInt8((value >> 8) & 0xFF))
        buffer.append(UInt8(value & 0xFF))
    }
}
