import APNSCore

/// The 6-byte packet a binary gateway writes before it closes the connection: `08 | status (1) |
/// identifier (4)`. Everything written after the named notification was discarded by the gateway.
package struct BinaryErrorResponse: Sendable, Hashable {
    /// The packet's length.
    package static let byteCount = 6
    /// The command byte of an error response.
    package static let command: UInt8 = 8

    /// The status byte.
    package var status: BinaryStatus
    /// The identifier of the notification the status is about (for ``BinaryStatus/shutdown``: the last one
    /// the gateway processed).
    package var identifier: UInt32

    /// Creates a packet's contents.
    package init(status: BinaryStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// Reads a packet from the first ``byteCount`` bytes; `nil` when fewer arrived or the command is not 8
    /// (a gateway that writes anything else is not speaking the protocol).
    package init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count >= Self.byteCount else { return nil }
        var index = bytes.startIndex
        func next() -> UInt8 {
            defer { index = bytes.index(after: index) }
            return bytes[index]
        }
        guard next() == Self.command else { return nil }
        self.status = BinaryStatus(rawValue: next())
        self.identifier = (0..<4).reduce(UInt32(0)) { value, _ in value << 8 | UInt32(next()) }
    }

    /// The packet's bytes.
    package var bytes: [UInt8] {
        var bytes: [UInt8] = [Self.command, self.status.rawValue]
        BinaryFrame.append(self.identifier, to: &bytes)
        return bytes
    }
}

/// The status of an error response, as Apple listed them; any other byte is kept in ``other(_:)``.
package enum BinaryStatus: Sendable, Hashable {
    case noErrors
    case processingError
    case missingDeviceToken
    case missingTopic
    case missingPayload
    case invalidTokenSize
    case invalidTopicSize
    case invalidPayloadSize
    case invalidToken
    /// The gateway is closing for maintenance; the identifier is the last notification it processed.
    case shutdown
    /// The gateway could not parse what was written.
    case protocolError
    /// Apple's "None (unknown)".
    case unknown
    /// A status Apple never listed.
    case other(UInt8)

    /// Reads a status byte.
    package init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .noErrors
        case 1: self = .processingError
        case 2: self = .missingDeviceToken
        case 3: self = .missingTopic
        case 4: self = .missingPayload
        case 5: self = .invalidTokenSize
        case 6: self = .invalidTopicSize
        case 7: self = .invalidPayloadSize
        case 8: self = .invalidToken
        case 10: self = .shutdown
        case 128: self = .protocolError
        case 255: self = .unknown
        default: self = .other(rawValue)
        }
    }

    /// The status byte.
    package var rawValue: UInt8 {
        switch self {
        case .noErrors: 0
        case .processingError: 1
        case .missingDeviceToken: 2
        case .missingTopic: 3
        case .missingPayload: 4
        case .invalidTokenSize: 5
        case .invalidTopicSize: 6
        case .invalidPayloadSize: 7
        case .invalidToken: 8
        case .shutdown: 10
        case .protocolError: 128
        case .unknown: 255
        case .other(let value): value
        }
    }

    /// What the status means for the notification it names.
    package var verdict: BinaryVerdict {
        switch self {
        case .noErrors, .shutdown: .notFailed
        case .missingDeviceToken: .refused(.missingDeviceToken)
        case .missingTopic: .refused(.missingTopic)
        case .missingPayload: .refused(.payloadEmpty)
        case .invalidTokenSize, .invalidToken: .refused(.badDeviceToken)
        case .invalidTopicSize: .refused(.badTopic)
        case .invalidPayloadSize: .refused(.payloadTooLarge)
        // The gateway could not parse our bytes: sending them again would fail the same way.
        case .protocolError: .refused(.unknown("ProtocolError"))
        case .processingError, .unknown, .other: .retry(self.reasonText)
        }
    }

    /// The name outcomes and logs use for a status that is not a rejection reason.
    package var reasonText: String {
        switch self {
        case .noErrors: "NoErrors"
        case .processingError: "ProcessingError"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .missingPayload: "MissingPayload"
        case .invalidTokenSize: "InvalidTokenSize"
        case .invalidTopicSize: "InvalidTopicSize"
        case .invalidPayloadSize: "InvalidPayloadSize"
        case .invalidToken: "InvalidToken"
        case .shutdown: "Shutdown"
        case .protocolError: "ProtocolError"
        case .unknown: "Unknown"
        case .other(let value): "Status\(value)"
        }
    }
}

/// What an error response means for the notification it names.
package enum BinaryVerdict: Sendable, Hashable {
    /// The notification was processed (status 0, or 10 where the identifier is the last one processed).
    case notFailed
    /// The gateway refused the notification for `Reason`. The bridge treats it as it treats the same reason
    /// over HTTP/2 (``Reason/disposition(status:)``): a fault of the notification is a rejection; a topic
    /// fault (3, 6) comes from the certificate and would fail every notification, so it halts the line.
    case refused(Reason)
    /// The gateway failed; the notification may be sent again (the text names the status).
    case retry(String)
}
