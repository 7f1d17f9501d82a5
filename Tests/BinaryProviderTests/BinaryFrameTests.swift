import APNSCore
import BinaryProvider
import Testing

import struct Foundation.UUID

// Byte vectors written from Apple's documented layouts (archive: "Binary Provider API", "Legacy Notification
// Format"): every integer big-endian.

private let tokenHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
private let tokenBytes: [UInt8] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF,
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF,
]
private let payload = Array(#"{"aps":{}}"#.utf8)  // 10 bytes

private func notification(
    token: String = tokenHex, payload: [UInt8] = payload, expiration: Int64? = 0x6000_0001,
    priority: Priority = .immediate
) -> APNSCore.Notification {
    Notification(
        deviceToken: token, topic: "com.example.app", pushType: .alert, priority: priority,
        expirationEpochSeconds: expiration, id: UUID(), payload: payload)
}

private func encoded(_ notification: APNSCore.Notification, _ format: BinaryFormat, limit: Int = 2048) throws -> [UInt8]
{
    var buffer: [UInt8] = []
    try BinaryFrame.append(notification, identifier: 0x0102_0304, format: format, payloadLimitBytes: limit, to: &buffer)
    return buffer
}

@Suite("Binary provider framing")
struct BinaryFrameTests {
    @Test("framed (command 2): token, payload, identifier, expiration and priority items in one frame")
    func framed() throws {
        var expected: [UInt8] = [2, 0, 0, 0, 66]
        expected += [1, 0, 32] + tokenBytes
        expected += [2, 0, 10] + payload
        expected += [3, 0, 4, 0x01, 0x02, 0x03, 0x04]
        expected += [4, 0, 4, 0x60, 0x00, 0x00, 0x01]
        expected += [5, 0, 1, 10]
        #expect(try encoded(notification(), .framed) == expected)
    }

    @Test("framed without an expiration leaves the expiration item out; priority 5 is written as 5")
    func framedWithoutExpiration() throws {
        var expected: [UInt8] = [2, 0, 0, 0, 59]
        expected += [1, 0, 32] + tokenBytes
        expected += [2, 0, 10] + payload
        expected += [3, 0, 4, 0x01, 0x02, 0x03, 0x04]
        expected += [5, 0, 1, 5]
        #expect(try encoded(notification(expiration: nil, priority: .powerConsiderate), .framed) == expected)
    }

    @Test("enhanced (command 1): identifier, expiry, token and payload in fixed fields")
    func enhanced() throws {
        var expected: [UInt8] = [1, 0x01, 0x02, 0x03, 0x04, 0x60, 0x00, 0x00, 0x01, 0, 32]
        expected += tokenBytes + [0, 10] + payload
        #expect(try encoded(notification(), .enhanced) == expected)
    }

    @Test("enhanced without an expiration writes expiry 0 (the format has no 'none')")
    func enhancedWithoutExpiration() throws {
        let bytes = try encoded(notification(expiration: nil), .enhanced)
        #expect(Array(bytes[5..<9]) == [0, 0, 0, 0])
    }

    @Test("simple (command 0): token and payload only")
    func simple() throws {
        var expected: [UInt8] = [0, 0, 32]
        expected += tokenBytes + [0, 10] + payload
        #expect(try encoded(notification(), .simple) == expected)
    }

    @Test("an uppercase hex token is the same token")
    func uppercaseToken() throws {
        #expect(try encoded(notification(token: tokenHex.uppercased()), .framed) == encoded(notification(), .framed))
    }

    @Test(
        "what the binary protocol cannot carry is refused locally, with the reason the outcome gets",
        arguments: [
            (notification(token: String(tokenHex.dropLast())), BinaryFormat.framed, Reason.badDeviceToken)
                as (APNSCore.Notification, BinaryFormat, Reason),
            (notification(token: tokenHex + "00"), .framed, .badDeviceToken),
            (notification(token: String(tokenHex.dropLast()) + "g"), .enhanced, .badDeviceToken),
            (notification(token: ""), .simple, .badDeviceToken),
            (notification(payload: []), .framed, .payloadEmpty),
            (notification(payload: Array(repeating: 0x20, count: 2049)), .framed, .payloadTooLarge),
            (notification(expiration: -1), .framed, .badExpirationDate),
            (notification(expiration: 1 << 32), .enhanced, .badExpirationDate),
            (notification(priority: .powerSaving), .framed, .badPriority),
        ])
    func refusedLocally(notification: APNSCore.Notification, format: BinaryFormat, reason: Reason) {
        var buffer: [UInt8] = [0xAB]
        #expect(throws: BinaryFrameError.self) {
            try BinaryFrame.append(notification, identifier: 1, format: format, payloadLimitBytes: 2048, to: &buffer)
        }
        do {
            try BinaryFrame.append(notification, identifier: 1, format: format, payloadLimitBytes: 2048, to: &buffer)
        } catch {
            #expect(error.reason == reason)
        }
        #expect(buffer == [0xAB], "nothing is written for a refused notification")
    }

    /// A sender encodes a burst of notifications into one buffer. Reserving the exact size on every append grew it
    /// only by what the allocator rounded up, so a large buffer was copied again and again: 62% of a `make
    /// bench-binary` profile, whose reference encodes 22 MB into one buffer (issue 29).
    @Test("appending many notifications to one buffer grows it geometrically", arguments: BinaryFormat.allCases)
    func appendsGrowGeometrically(format: BinaryFormat) throws {
        var buffer: [UInt8] = []
        var reallocations = 0
        var capacity = buffer.capacity
        for identifier in 0..<100_000 {
            try BinaryFrame.append(
                notification(), identifier: UInt32(identifier), format: format, payloadLimitBytes: 2048, to: &buffer)
            if buffer.capacity != capacity {
                reallocations += 1
                capacity = buffer.capacity
            }
        }
        #expect(reallocations <= 40, "\(reallocations) reallocations for 100 000 appends")
    }

    @Test("the payload limit is the caller's: 256 for old gateways")
    func payloadLimit() throws {
        let exactly256 = notification(payload: Array(repeating: 0x20, count: 256))
        #expect(try encoded(exactly256, .enhanced, limit: 256).count == 1 + 4 + 4 + 2 + 32 + 2 + 256)
        #expect(throws: BinaryFrameError.self) {
            try encoded(notification(payload: Array(repeating: 0x20, count: 257)), .enhanced, limit: 256)
        }
    }
}

@Suite("Binary provider error responses")
struct BinaryErrorResponseTests {
    @Test("an error packet is 08, the status and the identifier")
    func parses() throws {
        let response = try #require(BinaryErrorResponse([8, 8, 0x00, 0x00, 0x01, 0x07]))
        #expect(response.status == .invalidToken)
        #expect(response.identifier == 0x107)
        #expect(response.bytes == [8, 8, 0x00, 0x00, 0x01, 0x07])
    }

    @Test("fewer than six bytes, or another command, is not an error packet")
    func refuses() {
        #expect(BinaryErrorResponse([8, 8, 0, 0, 1]) == nil)
        #expect(BinaryErrorResponse([9, 8, 0, 0, 1, 7]) == nil)
        #expect(BinaryErrorResponse([]) == nil)
    }

    @Test(
        "each status has its verdict for the notification it names",
        arguments: [
            (UInt8(0), BinaryVerdict.notFailed),
            (1, .retry("ProcessingError")),
            (2, .refused(.missingDeviceToken)),
            (3, .refused(.missingTopic)),
            (4, .refused(.payloadEmpty)),
            (5, .refused(.badDeviceToken)),
            (6, .refused(.badTopic)),
            (7, .refused(.payloadTooLarge)),
            (8, .refused(.badDeviceToken)),
            (10, .notFailed),
            (128, .refused(.unknown("ProtocolError"))),
            (255, .retry("Unknown")),
            (9, .retry("Status9")),
        ])
    func verdicts(status: UInt8, verdict: BinaryVerdict) {
        #expect(BinaryStatus(rawValue: status).verdict == verdict)
        #expect(BinaryStatus(rawValue: status).rawValue == status)
    }
}

@Suite("Feedback tuples")
struct FeedbackReaderTests {
    let tuples = [
        FeedbackTuple(timeEpochSeconds: 0x5F00_0000, token: tokenBytes),
        FeedbackTuple(timeEpochSeconds: 1, token: Array(tokenBytes.reversed())),
    ]

    @Test("tuples are time, token length and token, big-endian")
    func layout() {
        #expect(self.tuples[0].bytes == [0x5F, 0, 0, 0, 0, 32] + tokenBytes)
        #expect(self.tuples[0].deviceToken == tokenHex)
    }

    @Test("tuples read the same whether they arrive whole or a byte at a time")
    func pieces() throws {
        let stream = self.tuples.flatMap(\.bytes)
        var whole = FeedbackReader()
        #expect(try whole.read(stream) == self.tuples)
        #expect(!whole.hasPartialTuple)
        var bytewise = FeedbackReader()
        var read: [FeedbackTuple] = []
        for byte in stream { read += try bytewise.read([byte]) }
        #expect(read == self.tuples)
    }

    @Test("a truncated last tuple is left pending, not reported")
    func truncated() throws {
        var reader = FeedbackReader()
        #expect(try reader.read(self.tuples[0].bytes + [0, 0, 0]) == [self.tuples[0]])
        #expect(reader.hasPartialTuple)
    }

    @Test("a token length of 0 or over 100 bytes stops reading: the server is not speaking the protocol")
    func malformed() {
        var zero = FeedbackReader()
        #expect(throws: FeedbackReader.MalformedFeedback.self) { try zero.read([0, 0, 0, 1, 0, 0]) }
        var huge = FeedbackReader()
        #expect(throws: FeedbackReader.MalformedFeedback.self) { try huge.read([0, 0, 0, 1, 0xFF, 0xFF]) }
    }

    @Test("the fault carries the tuples the same piece completed before it")
    func malformedKeepsWholeTuples() {
        var reader = FeedbackReader()
        let error = #expect(throws: FeedbackReader.MalformedFeedback.self) {
            try reader.read(self.tuples[0].bytes + self.tuples[1].bytes + [0, 0, 0, 1, 0, 0])
        }
        #expect(error?.tuplesBefore == [self.tuples[0], self.tuples[1]])
    }
}
