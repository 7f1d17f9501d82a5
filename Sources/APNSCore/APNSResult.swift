import Foundation

/// An answer APNs gave to one request (Apple: *Handling notification responses from APNs*).
///
/// Its properties are constants: an explicit initialiser of a struct with `var` properties copies the new value once
/// more (docs/architecture.md, "The parts and their boundaries"), and every answer is made by one.
package struct APNSResponse: Sendable, Hashable {
    /// The HTTP `:status`.
    package let status: Int
    /// The `apns-id` response header: the request's own, or the one APNs generated.
    package let apnsID: String?
    /// The `apns-unique-id` response header (development environment only).
    package let apnsUniqueID: String?
    /// The reason of a non-200 answer. A body that is not Apple's JSON becomes
    /// ``Reason/unknown(_:)`` with a description of what arrived, so it is still classified by status.
    package let reason: Reason?
    /// For 410: when APNs confirmed the token was no longer valid, in milliseconds since the epoch.
    package let invalidSinceEpochMilliseconds: Int64?

    /// Creates a response from its parts.
    package init(
        status: Int,
        apnsID: String? = nil,
        apnsUniqueID: String? = nil,
        reason: Reason? = nil,
        invalidSinceEpochMilliseconds: Int64? = nil
    ) {
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.invalidSinceEpochMilliseconds = invalidSinceEpochMilliseconds
    }

    /// Parses a response from its status, headers and body; never fails.
    ///
    /// A 200 ignores its body. Any other status reads `{"reason": ..., "timestamp": <ms>}`; a missing,
    /// non-JSON or reason-less body yields ``Reason/unknown(_:)`` (`"MalformedResponseBody"`), which
    /// ``Reason/disposition(status:)`` still classifies by status.
    package init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        let parsed = status == 200 ? nil : ErrorBody.parse(body)
        self.init(
            status: status, apnsID: headers.first { $0.name == "apns-id" }?.value,
            apnsUniqueID: headers.first { $0.name == "apns-unique-id" }?.value,
            reason: status == 200 ? nil : parsed?.reason ?? .unknown(ErrorBody.malformedReason),
            invalidSinceEpochMilliseconds: parsed?.timestampMilliseconds)
    }

    /// What this answer means for the notification and the bridge.
    package var disposition: Disposition {
        if self.status == 200 { return .delivered }
        return (self.reason ?? .unknown(ErrorBody.malformedReason)).disposition(status: self.status)
    }
}

/// The JSON body of an APNs error answer, `{"reason": "...", "timestamp": <ms>}`.
package struct ErrorBody: Sendable, Hashable {
    /// The reason an unparseable error body is reported with.
    package static let malformedReason = "MalformedResponseBody"
    /// The latest 410 timestamp accepted, 9999-12-31T23:59:59.999Z in milliseconds; a later (or negative,
    /// or non-integer-sized) one is dropped as if absent.
    package static let latestTimestampMilliseconds: Int64 = 253_402_300_799_999

    /// The reason string, parsed.
    package var reason: Reason
    /// The 410 timestamp in milliseconds since the epoch.
    package var timestampMilliseconds: Int64?

    /// Creates a body.
    package init(reason: Reason, timestampMilliseconds: Int64? = nil) {
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// Parses a body; `nil` when it is not a JSON object with a string `reason`. A `timestamp` outside
    /// 0...``latestTimestampMilliseconds`` is left out.
    package static func parse(_ body: [UInt8]) -> ErrorBody? {
        guard !body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let reason = object["reason"] as? String
        else { return nil }
        var timestamp: Int64?
        // A server's number is taken only when it is a time an outcome can state: `int64Value` of a number
        // beyond 64 bits answers garbage rather than failing, and RFC 3339 has four-digit years.
        if let number = object["timestamp"] as? NSNumber {
            let value = number.doubleValue
            if value.isFinite, value >= 0, value <= Double(Self.latestTimestampMilliseconds) {
                timestamp = number.int64Value
            }
        }
        return ErrorBody(reason: Reason(rawValue: reason), timestampMilliseconds: timestamp)
    }

    /// The body as APNs writes it.
    package var jsonBytes: [UInt8] {
        var text = "{\"reason\":\"\(JSONText.escaped(self.reason.rawValue))\""
        if let timestamp = self.timestampMilliseconds {
            text += ",\"timestamp\":\(timestamp)"
        }
        text += "}"
        return Array(text.utf8)
    }
}

/// Why a request got no answer from APNs.
package enum APNSFailure: Sendable, Hashable {
    /// The request timed out; APNs may or may not have received it.
    case timeout
    /// The connection broke before the answer and the request could not be re-sent in time.
    case connectionLost
    /// No connection to APNs could be made (DNS, TCP, TLS); the string says why.
    case unreachable(String)
    /// The answer could not be read as HTTP (no `:status`, a stream reset); the string says what arrived.
    /// Treated like a lost connection: nothing says APNs took the notification.
    case malformedResponse(String)

    /// The reason written into outcomes and metrics.
    package var reason: String {
        switch self {
        case .timeout: "RequestTimeout"
        case .connectionLost: "ConnectionLost"
        case .unreachable: "Unreachable"
        case .malformedResponse: "MalformedResponse"
        }
    }

    /// Unreachable APNs is systemic (docs/operations.md, "Guarantees"); everything else is worth sending again.
    package var disposition: Disposition {
        switch self {
        case .unreachable: .systemic
        case .timeout, .connectionLost, .malformedResponse: .retryable
        }
    }
}

/// The result of sending one notification: an answer or a transport failure. Never an error thrown.
package enum APNSResult: Sendable, Hashable {
    /// APNs answered (any status), or a local check answered for it (see ``NotificationValidation``).
    case answered(APNSResponse)
    /// No answer.
    case failed(APNSFailure)

    /// What this result means for the notification and the bridge.
    package var disposition: Disposition {
        switch self {
        case .answered(let response): response.disposition
        case .failed(let failure): failure.disposition
        }
    }
}
