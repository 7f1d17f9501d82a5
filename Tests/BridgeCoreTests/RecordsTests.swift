import APNSCore
import Foundation
import Routing
import Testing

@testable import BridgeCore

@Suite("Records")
struct RecordsTests {
    let source = SourceCoordinates(topic: "orders.shipped", partition: 3, offset: 1234, key: Array("customer-42".utf8))

    @Test("an outcome encodes every field of docs/data-contract.md with JSON types")
    func outcomeFields() throws {
        let record = OutcomeRecord(
            notificationID: "8b4c2a1e-0000-8000-8000-000000000000", route: "order-shipped", source: self.source,
            deviceToken: String(repeating: "ab", count: 32), apnsTopic: "com.example.shop", pushType: "alert",
            priority: 10, status: .delivered, httpStatus: 200, reason: nil, apnsUniqueID: nil, attempts: 1,
            latencyMilliseconds: 12.4, sentAtEpochMilliseconds: 1_795_860_000_123,
            completedAtEpochMilliseconds: 1_795_860_000_135
        )
        let object = try #require(JSONSerialization.jsonObject(with: Data(record.encoded())) as? [String: Any])
        #expect(object["schema"] as? String == "pushbridge.outcome.v1")
        #expect(object["status"] as? String == "delivered")
        #expect(object["http_status"] as? Int == 200)
        #expect(object["reason"] is NSNull)
        #expect(object["latency_ms"] as? Double == 12.4)
        #expect(object["sent_at"] as? String == "2026-11-28T10:00:00.123Z")
        #expect(object["completed_at"] as? String == "2026-11-28T10:00:00.135Z")
        let source = try #require(object["source"] as? [String: Any])
        #expect(source["partition"] as? Int == 3)
        #expect(source["offset"] as? Int == 1234)
        #expect(source["key"] as? String == "customer-42")
        #expect(Set(object.keys).count == 16)
    }

    @Test(
        "the source key in a record is its text as keyText makes it, whether written from bytes or from a string",
        arguments: [
            Array("customer-42".utf8), Array("quote\" backslash\\ nul\u{0} del\u{7F} tab\t".utf8),
            Array("ключ-🚀".utf8), [0x61, 0xFF, 0xFE, 0x62], [0xC3], [],
            [UInt8](repeating: 0x41, count: 1024), [UInt8](repeating: 0x41, count: 1025),
            [UInt8](repeating: 0x22, count: 1024),
        ])
    func sourceKeyText(key: [UInt8]) throws {
        let source = SourceCoordinates(topic: "orders", partition: 0, offset: 1, key: key)
        #expect(try Self.writtenSourceKey(source) as? String == source.keyText)
    }

    @Test("an event without a Kafka key (a tombstone's or a keyless producer's) has a null source key")
    func nullSourceKey() throws {
        let source = SourceCoordinates(topic: "orders", partition: 0, offset: 1, key: nil)
        #expect(try Self.writtenSourceKey(source) is NSNull)
    }

    /// The `source.key` of an outcome record for `source`, as JSON reads it back.
    private static func writtenSourceKey(_ source: SourceCoordinates) throws -> Any? {
        let record = OutcomeRecord(
            notificationID: "8b4c2a1e-0000-8000-8000-000000000000", route: "r", source: source,
            deviceToken: "00", apnsTopic: "com.example.shop", pushType: "alert", priority: 10, status: .delivered,
            httpStatus: 200, reason: nil, apnsUniqueID: nil, attempts: 1, latencyMilliseconds: nil,
            sentAtEpochMilliseconds: nil, completedAtEpochMilliseconds: 0)
        let object = try #require(JSONSerialization.jsonObject(with: Data(record.encoded())) as? [String: Any])
        let written = try #require(object["source"] as? [String: Any])
        return written["key"]
    }

    @Test("hostile strings stay valid JSON")
    func escaping() throws {
        let hostile = "quote\" backslash\\ newline\n nul\u{0} tab\t emoji 🚀 {{x}}"
        let record = InvalidTokenRecord(
            deviceToken: "00", apnsTopic: hostile, reason: "Unregistered", invalidSinceEpochMilliseconds: 0,
            notificationID: "id", route: hostile, source: self.source
        )
        let object = try #require(JSONSerialization.jsonObject(with: Data(record.encoded())) as? [String: Any])
        #expect(object["apns_topic"] as? String == hostile)
        #expect(object["invalid_since"] as? String == "1970-01-01T00:00:00.000Z")
    }

    @Test(
        "timestamps match Foundation's calendar",
        arguments: [
            Int64(0), 951_782_400_000, 4_107_542_399_999, -1, 1_795_860_000_123,
        ])
    func timestamps(milliseconds: Int64) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        #expect(JSONText.timestamp(epochMilliseconds: milliseconds) == expected)
    }

    @Test("a dead letter keeps the source headers and adds the pushbridge headers")
    func deadLetterHeaders() {
        let letter = DeadLetter(
            error: "route order-shipped: device_tokens: {{customer.apns_tokens}} is missing",
            route: "order-shipped", source: self.source, value: Array("{}".utf8),
            sourceHeaders: [("trace", [1, 2, 3])]
        )
        let names = letter.headers.map(\.0)
        #expect(
            names == [
                "trace", "pushbridge-error", "pushbridge-route", "pushbridge-source-topic",
                "pushbridge-source-partition", "pushbridge-source-offset",
            ])
        #expect(letter.headers[0].1 == [1, 2, 3])
        #expect(letter.headers[5].1 == Array("1234".utf8))
        #expect(letter.key == Array("customer-42".utf8))
    }

    @Test(
        "the writer's numbers match Swift's own formatting at every magnitude",
        arguments: [
            Int64(0), 7, -7, 10, 99, 100, -100, 1_234_567_890, Int64.max, Int64.min, Int64.max - 9, 999_999_999_999,
        ])
    func writerIntegers(value: Int64) {
        var json = JSONWriter()
        json.int(value)
        #expect(String(decoding: json.bytes, as: UTF8.self) == String(value))
    }

    @Test(
        "milliseconds keep up to three decimals without trailing zeros",
        arguments: [
            (12.4, "12.4"), (0.125, "0.125"), (-0.5, "-0.5"), (3.0, "3"), (1.05, "1.05"), (-12.001, "-12.001"),
            (Double.nan, "null"), (1e300, "null"),
        ])
    func writerMilliseconds(value: Double, expected: String) {
        var json = JSONWriter()
        json.milliseconds(value)
        #expect(String(decoding: json.bytes, as: UTF8.self) == expected)
    }

    @Test("strings are escaped around unescaped runs, nested objects get their commas")
    func writerStringsAndNesting() throws {
        var json = JSONWriter()
        json.beginObject()
        json.key("a")
        json.string("plain")
        json.key("b")
        json.string("q\"uo\\te\n\r\t\u{01}\u{7F}é end")
        json.key("c")
        json.beginObject()
        json.key("d")
        json.null()
        json.key("e")
        json.timestamp(epochMilliseconds: 0)
        json.endObject()
        json.key("f")
        json.timestamp(epochMilliseconds: nil)
        json.endObject()
        let text = String(decoding: json.bytes, as: UTF8.self)
        #expect(
            text
                == #"{"a":"plain","b":"q\"uo\\te\n\r\t\u0001\u007fé end","c":{"d":null,"e":"1970-01-01T00:00:00.000Z"},"f":null}"#
        )
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String: Any])
        #expect(object["b"] as? String == "q\"uo\\te\n\r\t\u{01}\u{7F}é end")
    }

    @Test("timestamps match Foundation's calendar at 5000 instants from 1900 to the end of 9999, and at its edges")
    func timestampsAcrossTheYears() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        let first: Int64 = -2_208_988_800_000  // 1900-01-01T00:00:00.000Z
        let last: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z
        // SplitMix64 from a fixed seed: the same instants every run.
        var state: UInt64 = 0x5EED
        var instants: [Int64] = [first, last, 0, -1, 951_868_799_999, 951_868_800_000, 4_102_444_800_000]
        for _ in 0..<5000 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            mixed ^= mixed >> 31
            instants.append(first + Int64(mixed % UInt64(last - first + 1)))
        }
        let wrong = instants.filter { milliseconds in
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            return JSONText.timestamp(epochMilliseconds: milliseconds) != expected
        }
        #expect(wrong.isEmpty, "differs from Foundation at \(wrong.prefix(5))")
    }

    @Test("the extreme instants an Int64 holds are written in full, without trapping")
    func timestampsAtTheEndsOfInt64() throws {
        let shape = try Regex(#"^-?[0-9]+-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$"#)
        for milliseconds in [Int64.min, Int64.min + 1, Int64.max - 1, Int64.max] {
            let text = JSONText.timestamp(epochMilliseconds: milliseconds)
            #expect(text.wholeMatch(of: shape) != nil, "\(milliseconds) -> \(text)")
        }
        #expect(JSONText.timestamp(epochMilliseconds: .max).hasSuffix("T07:12:55.807Z"))
    }

    @Test("years outside four digits are written in full")
    func timestampYearsOutsideRFC3339() {
        #expect(JSONText.timestamp(epochMilliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
        #expect(JSONText.timestamp(epochMilliseconds: -62_167_219_200_001) == "-1-12-31T23:59:59.999Z")
    }
}
