import APNSCore
import Foundation
import Testing

@Suite("Notification validation")
struct NotificationValidationTests {
    @Test("a well-formed notification of every push type passes", arguments: PushType.allCases)
    func everyPushTypePasses(pushType: PushType) {
        let notification = Fixtures.notification(pushType: pushType)
        #expect(NotificationValidation.validate(notification) == nil)
        let headers = Dictionary(uniqueKeysWithValues: notification.apnsHeaders.map { ($0.name, $0.value) })
        #expect(headers["apns-push-type"] == pushType.rawValue)
        #expect(headers["apns-topic"] == Fixtures.topic + pushType.topicSuffix)
        #expect(headers["apns-priority"] == String(pushType.defaultPriority.rawValue))
        #expect(headers["apns-id"] == notification.apnsID)
    }

    @Test(
        "malformed device tokens are BadDeviceToken, a missing one MissingDeviceToken",
        arguments: [
            ("", Reason.missingDeviceToken),
            (String(repeating: "a", count: 63), .badDeviceToken),
            (String(repeating: "a", count: 62), .badDeviceToken),
            (String(repeating: "a", count: 202), .badDeviceToken),
            (String(repeating: "g", count: 64), .badDeviceToken),
            (String(repeating: "a", count: 63) + " ", .badDeviceToken),
        ]
    )
    func deviceTokens(token: String, reason: Reason) {
        #expect(NotificationValidation.validateDeviceToken(token) == reason)
    }

    @Test("tokens of 64 to 200 hex digits in either case pass")
    func validTokens() {
        #expect(NotificationValidation.validateDeviceToken(String(repeating: "aB", count: 32)) == nil)
        #expect(NotificationValidation.validateDeviceToken(String(repeating: "0f", count: 100)) == nil)
    }

    @Test("every byte value, at every place of a 64-digit token, is accepted exactly when it is a hex digit")
    func everyByteEverywhere() {
        let hexDigits = Set("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max {
            for place in 0..<64 {
                var token = [UInt8](repeating: UInt8(ascii: "7"), count: 64)
                token[place] = byte
                let result = token.withUnsafeBufferPointer {
                    NotificationValidation.validateDeviceToken(String(decoding: $0, as: UTF8.self))
                }
                // A byte above 0x7F is not valid UTF-8 alone; it decodes to U+FFFD, three bytes, still no hex digit.
                #expect(result == (hexDigits.contains(byte) ? nil : .badDeviceToken), "byte \(byte) at \(place)")
            }
        }
    }

    @Test("a background push with priority 10 is BadPriority")
    func backgroundPriority() {
        let notification = Fixtures.notification(pushType: .background, priority: .immediate)
        #expect(NotificationValidation.validate(notification) == .badPriority)
        #expect(NotificationValidation.validatePriority("10", pushType: .background) == .badPriority)
        #expect(NotificationValidation.validatePriority("5", pushType: .background) == nil)
    }

    @Test("priorities other than 1, 5 and 10 are BadPriority", arguments: ["0", "7", "high", ""])
    func badPriorities(value: String) {
        #expect(NotificationValidation.validatePriority(value, pushType: .alert) == .badPriority)
    }

    @Test("a topic without the push type's suffix is BadTopic, an empty one MissingTopic")
    func topicSuffix() {
        #expect(NotificationValidation.validateTopic("com.example.app", pushType: .voip) == .badTopic)
        #expect(NotificationValidation.validateTopic(".voip", pushType: .voip) == .badTopic)
        #expect(NotificationValidation.validateTopic("com.example.app.voip", pushType: .voip) == nil)
        #expect(NotificationValidation.validateTopic("", pushType: .alert) == .missingTopic)
    }

    @Test("an unknown push type is InvalidPushType")
    func pushType() {
        #expect(NotificationValidation.validatePushType("banner") == .invalidPushType)
        #expect(NotificationValidation.validatePushType("voip") == nil)
    }

    @Test("payloads: empty, too large (4096, 5120 for voip) and not an object")
    func payloads() {
        func payload(bytes: Int) -> [UInt8] {
            let prefix = Array(#"{"a":""#.utf8)
            return prefix + Array(repeating: UInt8(ascii: "x"), count: bytes - prefix.count - 2) + Array(#""}"#.utf8)
        }
        #expect(NotificationValidation.validatePayload([], pushType: .alert) == .payloadEmpty)
        #expect(NotificationValidation.validatePayload(payload(bytes: 4096), pushType: .alert) == nil)
        #expect(NotificationValidation.validatePayload(payload(bytes: 4097), pushType: .alert) == .payloadTooLarge)
        #expect(NotificationValidation.validatePayload(payload(bytes: 5120), pushType: .voip) == nil)
        #expect(NotificationValidation.validatePayload(payload(bytes: 5121), pushType: .voip) == .payloadTooLarge)
        #expect(NotificationValidation.validatePayload(Array("[1,2]".utf8), pushType: .alert) == .payloadEmpty)
        #expect(NotificationValidation.validatePayload(Array("{nope".utf8), pushType: .alert) == .payloadEmpty)
    }

    @Test("apns-id is Foundation's UUID string in lowercase")
    func apnsIDMatchesFoundation() {
        let edges = [
            UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            UUID(uuidString: "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF")!,
        ]
        for id in edges + (0..<64).map({ _ in UUID() }) {
            #expect(id.lowercasedString == id.uuidString.lowercased())
            var notification = Fixtures.notification(pushType: .alert)
            notification.id = id
            #expect(notification.apnsID == id.uuidString.lowercased())
        }
    }

    @Test("a payload the caller wrote as an object is checked for size only; other checks still apply")
    func payloadKnownToBeAnObject() {
        var notification = Fixtures.notification(pushType: .alert)
        notification.payload = Array("{nope".utf8)
        #expect(NotificationValidation.validate(notification) == .payloadEmpty)
        #expect(NotificationValidation.validate(notification, payloadIsJSONObject: true) == nil)
        notification.payload = []
        #expect(NotificationValidation.validate(notification, payloadIsJSONObject: true) == .payloadEmpty)
        notification.payload = Array(repeating: UInt8(ascii: " "), count: 4097)
        #expect(NotificationValidation.validate(notification, payloadIsJSONObject: true) == .payloadTooLarge)
        notification.payload = Array("{}".utf8)
        notification.deviceToken = "zz"
        #expect(NotificationValidation.validate(notification, payloadIsJSONObject: true) == .badDeviceToken)
    }

    @Test("a payload nested as deep as its size allows is answered, not a crash")
    func deeplyNestedPayload() {
        let depth = 2_500
        let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        let payload = Array(("{\"a\":" + nested + "}").utf8)
        #expect(payload.count <= PushType.voip.maxPayloadBytes)
        #expect(NotificationValidation.validatePayload(payload, pushType: .voip) != .payloadTooLarge)
    }

    @Test(
        "faults come in one order: token, topic, priority, expiration, collapse id, payload; the event's part (expiration, collapse id) is the one the mapper runs"
    )
    func faultOrder() {
        var notification = Fixtures.notification(pushType: .background)
        notification.deviceToken = "not hex"
        notification.topic = ""
        notification.priority = .immediate
        notification.expirationEpochSeconds = -1
        notification.collapseID = String(repeating: "c", count: 65)
        notification.payload = []
        var reasons: [Reason] = []
        while let reason = NotificationValidation.validate(notification) {
            reasons.append(reason)
            switch reason {
            case .badDeviceToken: notification.deviceToken = Fixtures.deviceToken(1)
            case .missingTopic: notification.topic = Fixtures.topic
            case .badPriority: notification.priority = .powerConsiderate
            case .badExpirationDate:
                #expect(
                    NotificationValidation.validateEventFields(
                        expirationEpochSeconds: notification.expirationEpochSeconds,
                        collapseID: notification.collapseID) == .badExpirationDate)
                notification.expirationEpochSeconds = 0
            case .badCollapseId:
                #expect(
                    NotificationValidation.validateEventFields(
                        expirationEpochSeconds: notification.expirationEpochSeconds,
                        collapseID: notification.collapseID) == .badCollapseId)
                notification.collapseID = nil
            case .payloadEmpty: notification.payload = Array("{}".utf8)
            default:
                Issue.record("unexpected \(reason)")
                return
            }
        }
        #expect(
            reasons == [
                .badDeviceToken, .missingTopic, .badPriority, .badExpirationDate, .badCollapseId, .payloadEmpty,
            ])
    }

    @Test("a collapse id over 64 bytes is BadCollapseId")
    func collapseID() {
        #expect(NotificationValidation.validateCollapseID(String(repeating: "c", count: 64)) == nil)
        #expect(NotificationValidation.validateCollapseID(String(repeating: "c", count: 65)) == .badCollapseId)
        #expect(NotificationValidation.validateCollapseID(String(repeating: "é", count: 33)) == .badCollapseId)
    }

    /// Values no HTTP/2 header to APNs may carry: control characters, DEL, non-ASCII, spaces at either end.
    static let unsendableHeaderValues = [
        "a\r\napns-priority: 5", "a\nb", "a\u{0}b", "tab\there", "del\u{7F}", "東京", "é", " lead", "trail ", " ",
    ]

    @Test("header values hold visible ASCII and inner spaces only", arguments: Self.unsendableHeaderValues)
    func unsendableHeaderValuesAreRefused(value: String) {
        #expect(!NotificationValidation.isHeaderValue(value))
        #expect(NotificationValidation.validateCollapseID(value) == .badCollapseId)
        #expect(NotificationValidation.validateTopic(value, pushType: .alert) == .badTopic)
        #expect(NotificationValidation.validateDeviceToken(value) == .badDeviceToken)
        #expect(NotificationValidation.validateExpiration(value) == .badExpirationDate)
    }

    @Test("every visible ASCII character and inner spaces may be sent")
    func visibleASCII() {
        let all = String(decoding: Array(0x21...0x7E).map(UInt8.init), as: UTF8.self)
        #expect(NotificationValidation.isHeaderValue(all))
        #expect(NotificationValidation.isHeaderValue("order 42 - shipped"))
        #expect(NotificationValidation.isHeaderValue(""))
        #expect(NotificationValidation.validateCollapseID("order 42") == nil)
    }

    @Test("a notification with a control character in a header is rejected with that header's reason")
    func notificationHeaders() {
        var collapse = Fixtures.notification()
        collapse.collapseID = "order-x\r\napns-priority: 5"
        #expect(NotificationValidation.validate(collapse) == .badCollapseId)
        #expect(NotificationValidation.validateHeaderValues(collapse) == .badCollapseId)
        var topic = Fixtures.notification()
        topic.topic = "com.example.app\n"
        #expect(NotificationValidation.validate(topic) == .badTopic)
        #expect(NotificationValidation.validateHeaderValues(topic) == .badTopic)
        var token = Fixtures.notification()
        token.deviceToken = "abc\u{0}"
        #expect(NotificationValidation.validate(token) == .badDeviceToken)
        #expect(NotificationValidation.validateHeaderValues(token) == .badDeviceToken)
    }

    @Test("validateHeaderValues leaves the token's format and the payload to validate")
    func headerValuesOnly() {
        var notification = Fixtures.notification(token: "short-token", payload: "")
        #expect(NotificationValidation.validateHeaderValues(notification) == nil)
        #expect(NotificationValidation.validate(notification) == .badDeviceToken)
        notification.deviceToken = String(repeating: "a", count: 201)
        #expect(NotificationValidation.validateHeaderValues(notification) == .badDeviceToken)
        notification.deviceToken = "short-token"
        notification.expirationEpochSeconds = -1
        #expect(NotificationValidation.validateHeaderValues(notification) == .badExpirationDate)
    }

    @Test(
        "raw priorities and expirations are decimal digits only",
        arguments: ["+5", " 5", "5 ", "-0", "0x5", "１０"]
    )
    func rawNumbers(value: String) {
        #expect(NotificationValidation.validatePriority(value, pushType: .alert) == .badPriority)
        #expect(NotificationValidation.validateExpiration(value) == .badExpirationDate)
    }

    @Test("a raw expiration beyond 64 bits is BadExpirationDate")
    func hugeExpiration() {
        #expect(NotificationValidation.validateExpiration("9223372036854775807") == nil)
        #expect(NotificationValidation.validateExpiration("9223372036854775808") == .badExpirationDate)
        #expect(NotificationValidation.validateExpiration(String(repeating: "9", count: 400)) == .badExpirationDate)
    }

    @Test("apns-id must be a lowercase canonical UUID")
    func messageID() {
        #expect(NotificationValidation.validateMessageID("123e4567-e89b-12d3-a456-426614174000") == nil)
        #expect(NotificationValidation.validateMessageID("123E4567-E89B-12D3-A456-426614174000") == .badMessageId)
        #expect(NotificationValidation.validateMessageID("123e4567e89b12d3a456426614174000") == .badMessageId)
        #expect(NotificationValidation.validateMessageID("not-a-uuid") == .badMessageId)
    }

    @Test("expiration must be a non-negative integer")
    func expiration() {
        #expect(NotificationValidation.validateExpiration("0") == nil)
        #expect(NotificationValidation.validateExpiration("-1") == .badExpirationDate)
        #expect(NotificationValidation.validateExpiration("tomorrow") == .badExpirationDate)
        var notification = Fixtures.notification()
        notification.expirationEpochSeconds = -5
        #expect(NotificationValidation.validate(notification) == .badExpirationDate)
    }
}

@Suite("Responses")
struct ResponseTests {
    @Test("a 410 body gives the reason and the timestamp in milliseconds")
    func unregistered() {
        let response = APNSResponse(
            status: 410,
            headers: [(name: "apns-id", value: "id-1"), (name: "apns-unique-id", value: "u-1")],
            body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8)
        )
        #expect(response.reason == .unregistered)
        #expect(response.invalidSinceEpochMilliseconds == 1_700_000_000_123)
        #expect(response.apnsID == "id-1")
        #expect(response.apnsUniqueID == "u-1")
        #expect(response.disposition == .rejected)
    }

    @Test("an unknown reason string round-trips and is classified by status")
    func unknownReason() {
        let response = APNSResponse(status: 503, headers: [], body: Array(#"{"reason":"NewThing"}"#.utf8))
        #expect(response.reason == .unknown("NewThing"))
        #expect(response.disposition == .retryable)
    }

    @Test(
        "malformed error bodies become a classified unknown reason, not a crash",
        arguments: ["", "not json", "[1]", #"{"reason":42}"#, #"{"timestamp":1}"#, "{\"reason\":\"\u{0}"]
    )
    func malformedBodies(body: String) {
        let rejected = APNSResponse(status: 400, headers: [], body: Array(body.utf8))
        #expect(rejected.reason == .unknown(ErrorBody.malformedReason))
        #expect(rejected.disposition == .rejected)
        let failed = APNSResponse(status: 500, headers: [], body: Array(body.utf8))
        #expect(failed.disposition == .retryable)
    }

    @Test(
        "a 410 timestamp that is not a time an outcome can state is left out, not a trap or garbage",
        arguments: [
            "1e999", "99999999999999999999999999", "-1", "-1e300", "1e300", "253402300800000", "\"soon\"", "null",
        ]
    )
    func outOfRangeTimestamps(timestamp: String) {
        let response = APNSResponse(
            status: 410, headers: [], body: Array(#"{"reason":"Unregistered","timestamp":\#(timestamp)}"#.utf8))
        #expect(response.invalidSinceEpochMilliseconds == nil)
        #expect(response.disposition == .rejected)
    }

    @Test("the latest timestamp accepted is the last millisecond of year 9999")
    func latestTimestamp() {
        let response = APNSResponse(
            status: 410, headers: [], body: Array(#"{"reason":"Unregistered","timestamp":253402300799999}"#.utf8))
        #expect(response.invalidSinceEpochMilliseconds == ErrorBody.latestTimestampMilliseconds)
    }

    @Test("HTTP dates outside years 1-9999 are written clamped instead of trapping")
    func httpDateClamps() {
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1e300)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1e300)) == "Mon, 01 Jan 0001 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .infinity)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .nan)) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test("a 200 is delivered whatever its body")
    func delivered() {
        let response = APNSResponse(status: 200, headers: [], body: Array("garbage".utf8))
        #expect(response.reason == nil)
        #expect(response.disposition == .delivered)
    }

    @Test("every documented reason maps to its classification", arguments: Reason.documented)
    func classification(reason: Reason) {
        let expected: Disposition
        switch reason {
        case .expiredProviderToken: expected = .renewToken
        case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable, .shutdown,
            .idleTimeout:
            expected = .retryable
        case .invalidProviderToken, .missingProviderToken, .badCertificate, .badCertificateEnvironment, .forbidden,
            .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken, .topicDisallowed,
            .badTopic, .missingTopic, .badPath, .methodNotAllowed, .topicMismatch, .featureNotEnabled:
            expected = .systemic
        default: expected = .rejected
        }
        let body = ErrorBody(reason: reason).jsonBytes
        let response = APNSResponse(status: reason.status!, headers: [], body: body)
        #expect(response.reason == reason)
        #expect(response.disposition == expected)
    }

    @Test("transport failures: unreachable is systemic, the others retryable")
    func failures() {
        #expect(APNSResult.failed(.unreachable("dns")).disposition == .systemic)
        #expect(APNSResult.failed(.timeout).disposition == .retryable)
        #expect(APNSResult.failed(.connectionLost).disposition == .retryable)
        #expect(APNSResult.failed(.malformedResponse("no status")).disposition == .retryable)
    }
}
