/// One notification as a binary gateway reads it (the simulator's side of ``BinaryFrame``).
package struct DecodedBinaryNotification: Sendable, Hashable {
    // Made only by the decoder.
    /// The format it came in.
    package var format: BinaryFormat
    /// The identifier (0 for the simple format, which has none).
    package var identifier: UInt32
    /// The device token's bytes.
    package var token: [UInt8]
    /// The payload.
    package var payload: [UInt8]
    /// The expiration in UNIX seconds, when the notification carried one.
    package var expirationEpochSeconds: UInt32?
    /// The priority byte, when the notification carried one (framed only).
    package var priority: UInt8?
}

/// What a gateway finds wrong with a notification it could read to its end: the status to answer with.
package struct BinaryFrameProblem: Error, Sendable, Hashable {
    /// The status of the error packet.
    package var status: BinaryStatus
    /// The identifier to name (0 when none could be read).
    package var identifier: UInt32

    /// Creates a problem.
    package init(status: BinaryStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }
}

/// Reads binary provider notifications from a byte stream arriving in pieces of any size, as a gateway does:
/// a notification is returned once all its bytes are there; between pieces at most one notification's bytes
/// are held (a frame announces its length, bounded by ``maxFrameBytes``).
///
/// Stream-level garbage (an unknown command, a frame announcing more than ``maxFrameBytes``) cannot be skipped:
/// the decoder stops with ``BinaryStatus/protocolError`` and the gateway closes. A well-delimited notification
/// whose content is wrong (a token that is not 32 bytes, a missing item, a payload over the limit) is returned as
/// a ``BinaryFrameProblem`` with Apple's matching status, as the gateway would answer it.
package struct BinaryFrameDecoder: Sendable {
    /// The largest frame accepted (items of a 2 KB payload and a 100-byte token, with room to spare).
    package static let maxFrameBytes = 4096

    /// A read notification, or what is wrong with it.
    package typealias Result = Swift.Result<DecodedBinaryNotification, BinaryFrameProblem>

    /// The payload limit the decoder checks (2048 for framed, 256 for old gateways).
    package let payloadLimitBytes: Int
    private var buffer: [UInt8] = []
    private var stopped = false

    /// Creates a decoder that answers payloads over `payloadLimitBytes` with status 7.
    package init(payloadLimitBytes: Int = BinaryFrame.framedPayloadLimitBytes) {
        self.payloadLimitBytes = payloadLimitBytes
    }

    /// Whether part of a notification waits for more bytes.
    package var hasPartialNotification: Bool { !self.buffer.isEmpty }

    /// Reads `bytes` on; returns every notification completed, in order. After a stream-level problem (the
    /// last element is a failure with ``BinaryStatus/protocolError``) nothing more is read.
    package mutating func read(_ bytes: some Collection<UInt8>) -> [Result] {
        guard !self.stopped else { return [] }
        self.buffer.append(contentsOf: bytes)
        var results: [Result] = []
        var start = 0
        while start < self.buffer.count {
            let step = self.decode(at: start)
            switch step {
            case .needMore:
                self.buffer.removeFirst(start)
                return results
            case .done(let result, let length):
                results.append(result)
                start += length
            case .garbage(let identifier):
                results.append(.failure(BinaryFrameProblem(status: .protocolError, identifier: identifier)))
                self.stopped = true
                self.buffer.removeAll()
                return results
            }
        }
        self.buffer.removeAll(keepingCapacity: true)
        return results
    }

    private enum Step {
        case needMore
        case done(Result, length: Int)
        case garbage(identifier: UInt32)
    }

    private func decode(at start: Int) -> Step {
        let bytes = self.buffer
        let available = bytes.count - start
        func uint16(_ offset: Int) -> Int { Int(bytes[start + offset]) << 8 | Int(bytes[start + offset + 1]) }
        func uint32(_ offset: Int) -> UInt32 {
            var value: UInt32 = 0
            for index in 0..<4 { value = value << 8 | UInt32(bytes[start + offset + index]) }
            return value
        }
        switch bytes[start] {
        case BinaryFormat.framed.command:
            guard available >= 5 else { return .needMore }
            let frameLength = Int(uint32(1))
            guard frameLength <= Self.maxFrameBytes else { return .garbage(identifier: 0) }
            guard available >= 5 + frameLength else { return .needMore }
            return .done(self.items(Array(bytes[start + 5..<start + 5 + frameLength])), length: 5 + frameLength)
        case BinaryFormat.enhanced.command:
            guard available >= 11 else { return .needMore }
            let identifier = uint32(1)
            let tokenLength = uint16(9)
            guard available >= 11 + tokenLength + 2 else { return .needMore }
            let payloadLength = uint16(11 + tokenLength)
            let length = 13 + tokenLength + payloadLength
            guard length <= Self.maxFrameBytes else { return .garbage(identifier: identifier) }
            guard available >= length else { return .needMore }
            let notification = DecodedBinaryNotification(
                format: .enhanced, identifier: identifier, token: Array(bytes[start + 11..<start + 11 + tokenLength]),
                payload: Array(bytes[start + 13 + tokenLength..<start + length]), expirationEpochSeconds: uint32(5),
                priority: nil)
            return .done(self.checked(notification), length: length)
        case BinaryFormat.simple.command:
            guard available >= 3 else { return .needMore }
            let tokenLength = uint16(1)
            guard available >= 3 + tokenLength + 2 else { return .needMore }
            let payloadLength = uint16(3 + tokenLength)
            let length = 5 + tokenLength + payloadLength
            guard length <= Self.maxFrameBytes else { return .garbage(identifier: 0) }
            guard available >= length else { return .needMore }
            let notification = DecodedBinaryNotification(
                format: .simple, identifier: 0, token: Array(bytes[start + 3..<start + 3 + tokenLength]),
                payload: Array(bytes[start + 5 + tokenLength..<start + length]), expirationEpochSeconds: nil,
                priority: nil)
            return .done(self.checked(notification), length: length)
        default:
            return .garbage(identifier: 0)
        }
    }

    /// The items of a command-2 frame. Items may come in any order; an item that repeats, has the wrong size
    /// or runs past the frame is a problem of this notification (the frame itself is delimited).
    private func items(_ frame: [UInt8]) -> Result {
        var token: [UInt8]?
        var payload: [UInt8]?
        var identifier: UInt32?
        var expiration: UInt32?
        var priority: UInt8?
        var index = 0
        var malformed = false
        while index < frame.count {
            guard frame.count - index >= 3 else {
                malformed = true
                break
            }
            let id = frame[index]
            let length = Int(frame[index + 1]) << 8 | Int(frame[index + 2])
            guard frame.count - index - 3 >= length else {
                malformed = true
                break
            }
            let data = Array(frame[index + 3..<index + 3 + length])
            index += 3 + length
            func number() -> UInt32 { data.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            switch (id, length) {
            case (1, _) where token == nil: token = data
            case (2, _) where payload == nil: payload = data
            case (3, 4) where identifier == nil: identifier = number()
            case (4, 4) where expiration == nil: expiration = number()
            case (5, 1) where priority == nil: priority = data[0]
            default: malformed = true
            }
        }
        let named = identifier ?? 0
        if malformed {
            return .failure(BinaryFrameProblem(status: .protocolError, identifier: named))
        }
        guard let token, !token.isEmpty else {
            return .failure(BinaryFrameProblem(status: .missingDeviceToken, identifier: named))
        }
        guard let payload, !payload.isEmpty else {
            return .failure(BinaryFrameProblem(status: .missingPayload, identifier: named))
        }
        if let priority, priority != 5, priority != 10 {
            return .failure(BinaryFrameProblem(status: .protocolError, identifier: named))
        }
        return self.checked(
            DecodedBinaryNotification(
                format: .framed, identifier: named, token: token, payload: payload, expirationEpochSeconds: expiration,
                priority: priority))
    }

    private func checked(_ notification: DecodedBinaryNotification) -> Result {
        let identifier = notification.identifier
        if notification.token.isEmpty {
            return .failure(BinaryFrameProblem(status: .missingDeviceToken, identifier: identifier))
        }
        if notification.token.count != BinaryFrame.deviceTokenBytes {
            return .failure(BinaryFrameProblem(status: .invalidTokenSize, identifier: identifier))
        }
        if notification.payload.isEmpty {
            return .failure(BinaryFrameProblem(status: .missingPayload, identifier: identifier))
        }
        if notification.payload.count > self.payloadLimitBytes {
            return .failure(BinaryFrameProblem(status: .invalidPayloadSize, identifier: identifier))
        }
        return .success(notification)
    }
}
