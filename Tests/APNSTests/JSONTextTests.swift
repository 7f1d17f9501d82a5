import APNSCore
import Foundation
import Testing

/// The one JSON escaper, number and timestamp writer shared by the mapper, the records and the provider token.
struct JSONTextTests {
    @Test func everyControlCharacterQuoteBackslashAndDeleteIsEscapedAndTheRestKeptAsUTF8() throws {
        let text = String(decoding: (0..<0x20).map { UInt8($0) } + Array("\"\\\u{7F}é😀/".utf8), as: UTF8.self)
        let escaped = JSONText.escaped(text)
        #expect(escaped.hasPrefix(#"\u0000\u0001"#))
        #expect(escaped.contains(#"\b\t\n\u000b\f\r"#))
        #expect(escaped.hasSuffix(#"\u001f\"\\\u007fé😀/"#))
        #expect(!escaped.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "no raw control byte is left")
        // Any JSON parser reads the text back unchanged.
        var quoted: [UInt8] = []
        JSONText.appendQuoted(text, to: &quoted)
        let decoded = try JSONSerialization.jsonObject(with: Data(quoted), options: .fragmentsAllowed) as? String
        #expect(decoded == text)
    }

    @Test("every ASCII byte, at the ends and inside of a 39-byte text, comes back unchanged through a JSON parser")
    func everyASCIIByteEverywhereRoundTrips() throws {
        for byte in UInt8(0)...0x7F {
            for place in [0, 1, 17, 38] {
                var utf8 = Array("order-1234 shipped by carrier #7, today".utf8)
                utf8[place] = byte
                let text = String(decoding: utf8, as: UTF8.self)
                var quoted: [UInt8] = []
                JSONText.appendQuoted(text, to: &quoted)
                let parsed = try JSONSerialization.jsonObject(with: Data(quoted), options: .fragmentsAllowed) as? String
                #expect(parsed == text, "byte \(byte) at \(place): \(String(decoding: quoted, as: UTF8.self))")
                let needsEscape =
                    byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                #expect(needsEscape == (quoted.count > utf8.count + 2), "byte \(byte)")
            }
        }
    }

    @Test func textWithoutEscapesIsCopiedAsIs() {
        #expect(JSONText.escaped("") == "")
        #expect(JSONText.escaped("com.example.shop") == "com.example.shop")
    }

    @Test(arguments: [
        (Int64(0), "0"), (7, "7"), (10, "10"), (-1, "-1"), (1_234_567_890, "1234567890"),
        (.max, "9223372036854775807"), (.min, "-9223372036854775808"),
    ])
    func decimals(value: Int64, text: String) {
        var bytes: [UInt8] = []
        JSONText.appendDecimal(value, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == text)
    }

    @Test func doublesAreShortestAndNonFiniteOnesAreNull() {
        func text(_ value: Double) -> String {
            var bytes: [UInt8] = []
            JSONText.appendDouble(value, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(text(12.5) == "12.5")
        #expect(text(.nan) == "null")
        #expect(text(-.infinity) == "null")
    }

    @Test func timestampsAreRFC3339InUTCWithMilliseconds() {
        #expect(JSONText.timestamp(epochMilliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(JSONText.timestamp(epochMilliseconds: 1_795_860_000_123) == "2026-11-28T10:00:00.123Z")
        #expect(JSONText.timestamp(epochMilliseconds: -1) == "1969-12-31T23:59:59.999Z")
    }
}
