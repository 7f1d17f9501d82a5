import APNSCore
import BinaryProvider
import Testing

import struct Foundation.UUID

@Suite("Binary frame decoder (the gateway's side)")
struct BinaryFrameDecoderTests {
    static let token = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    static func encoded(_ format: BinaryFormat, identifier: UInt32 = 7, payloadBytes: Int = 10) throws -> [UInt8] {
        let notification = APNSCore.Notification(
            deviceToken: Self.token, topic: "t", pushType: .alert, priority: .powerConsiderate,
            expirationEpochSeconds: 1234, id: UUID(), payload: Array(repeating: 0x41, count: payloadBytes))
        var bytes: [UInt8] = []
        try BinaryFrame.append(
            notification, identifier: identifier, format: format, payloadLimitBytes: 4096, to: &bytes)
        return bytes
    }

    @Test("what the encoder writes, the decoder reads back, in every format", arguments: BinaryFormat.allCases)
    func roundTrip(format: BinaryFormat) throws {
        var decoder = BinaryFrameDecoder()
        let results = decoder.read(try Self.encoded(format))
        let decoded = try #require(results.first).get()
        #expect(results.count == 1)
        #expect(decoded.format == format)
        #expect(BinaryFrame.hex(decoded.token) == Self.token)
        #expect(decoded.payload == Array(repeating: 0x41, count: 10))
        #expect(decoded.identifier == (format == .simple ? 0 : 7))
        #expect(decoded.expirationEpochSeconds == (format == .simple ? nil : 1234))
        #expect(decoded.priority == (format == .framed ? 5 : nil))
    }

    @Test("notifications split across pieces of any size read the same")
    func pieces() throws {
        let stream =
            try Self.encoded(.framed, identifier: 1) + Self.encoded(.enhanced, identifier: 2)
            + Self.encoded(.framed, identifier: 3)
        var decoder = BinaryFrameDecoder()
        var identifiers: [UInt32] = []
        for byte in stream {
            for result in decoder.read([byte]) { identifiers.append(try result.get().identifier) }
        }
        #expect(identifiers == [1, 2, 3])
        #expect(!decoder.hasPartialNotification)
    }

    @Test("a payload over the gateway's limit is answered with status 7 and the notification's identifier")
    func payloadLimit() throws {
        var decoder = BinaryFrameDecoder(payloadLimitBytes: 256)
        let results = decoder.read(try Self.encoded(.framed, identifier: 9, payloadBytes: 257))
        #expect(results == [.failure(BinaryFrameProblem(status: .invalidPayloadSize, identifier: 9))])
    }

    @Test("a token that is not 32 bytes is status 5; a frame without a token item is status 2")
    func tokens() {
        var shortToken: [UInt8] = [2, 0, 0, 0, 20, 1, 0, 4, 1, 2, 3, 4, 2, 0, 3, 0x7B, 0x7D, 0x20, 3, 0, 4, 0, 0, 0, 5]
        var decoder = BinaryFrameDecoder()
        #expect(decoder.read(shortToken) == [.failure(BinaryFrameProblem(status: .invalidTokenSize, identifier: 5))])
        shortToken = [2, 0, 0, 0, 13, 2, 0, 3, 0x7B, 0x7D, 0x20, 3, 0, 4, 0, 0, 0, 6]
        var second = BinaryFrameDecoder()
        #expect(second.read(shortToken) == [.failure(BinaryFrameProblem(status: .missingDeviceToken, identifier: 6))])
    }

    @Test("an unknown command or a frame announcing more than 4096 bytes stops the stream with a protocol error")
    func garbage() throws {
        var unknown = BinaryFrameDecoder()
        #expect(unknown.read([9, 1, 2, 3]) == [.failure(BinaryFrameProblem(status: .protocolError, identifier: 0))])
        #expect(unknown.read(try Self.encoded(.framed)).isEmpty, "nothing is read after a protocol error")
        var huge = BinaryFrameDecoder()
        #expect(
            huge.read([2, 0, 0, 0x10, 0x01]) == [.failure(BinaryFrameProblem(status: .protocolError, identifier: 0))])
    }

    @Test("an item that repeats, has the wrong size or runs past its frame is this notification's protocol error")
    func malformedItems() {
        // identifier item of 3 bytes
        var decoder = BinaryFrameDecoder()
        #expect(
            decoder.read([2, 0, 0, 0, 6, 3, 0, 3, 0, 0, 1])
                == [.failure(BinaryFrameProblem(status: .protocolError, identifier: 0))])
        // an item announcing more than the frame holds; the next frame still reads
        var next = BinaryFrameDecoder()
        let results = next.read([2, 0, 0, 0, 4, 2, 0, 9, 0])
        #expect(results == [.failure(BinaryFrameProblem(status: .protocolError, identifier: 0))])
    }
}
