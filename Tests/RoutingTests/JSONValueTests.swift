import Foundation
import Routing
import Testing

@Suite struct JSONValueTests {
    @Test func parsesEveryKindOfValueKeepingMemberOrder() throws {
        let value = try JSONValue(parsing: #" {"z":null,"a":[true,false],"m":-12,"d":1.5,"s":"x"} "#)
        #expect(value == ["z": nil, "a": [true, false], "m": -12, "d": 1.5, "s": "x"])
        guard case .object(let members) = value else {
            Issue.record("not an object: \(value)")
            return
        }
        #expect(members.map(\.key) == ["z", "a", "m", "d", "s"])
    }

    @Test(arguments: ["0", "-1", "9223372036854775807", "-9223372036854775808", "1234567890123"])
    func integersRoundTripExactly(text: String) throws {
        let value = try JSONValue(parsing: text)
        guard case .integer = value else {
            Issue.record("\(text) parsed as \(value)")
            return
        }
        #expect(value.jsonText == text)
    }

    @Test func integersBeyondInt64BecomeDoubles() throws {
        #expect(try JSONValue(parsing: "9223372036854775808") == .double(9.223372036854775808e18))
        #expect(try JSONValue(parsing: "-9223372036854775809") == .double(-9.223372036854775809e18))
    }

    @Test(arguments: ["1.5", "-0.25", "1e+20", "1e-05", "3.141592653589793"])
    func doublesRoundTrip(text: String) throws {
        let value = try JSONValue(parsing: text)
        #expect(try JSONValue(parsing: value.jsonText) == value)
    }

    @Test func nonFiniteDoublesSerialiseAsNull() {
        #expect(JSONValue.double(.infinity).jsonText == "null")
        #expect(JSONValue.double(.nan).jsonText == "null")
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        let value = try JSONValue(parsing: #""a\"b\\c\/d\n\t\u00e9\ud83d\ude00""#)
        #expect(value == .string("a\"b\\c/d\n\té😀"))
    }

    @Test(arguments: [
        ("quote", "say \"hi\"", #""say \"hi\"""#),
        ("backslash", #"C:\path"#, #""C:\\path""#),
        ("newline", "a\nb", #""a\nb""#),
        ("control", "a\u{01}b", #""a\u0001b""#),
        ("unicode kept", "héllo 😀", "\"héllo 😀\""),
        ("ampersand", "a & b <c>", "\"a & b <c>\""),
    ])
    func serialisesStringsWithJSONEscaping(name: String, input: String, expected: String) {
        #expect(JSONValue.string(input).jsonText == expected, "\(name)")
    }

    @Test(arguments: [
        ("", JSONParseError.Code.unexpectedEnd),
        ("{", .unexpectedEnd),
        ("[1,]", .unexpectedByte),
        ("{\"a\" 1}", .unexpectedByte),
        ("01", .trailingBytes),
        ("-", .unexpectedEnd),
        ("1.", .invalidNumber),
        ("\"a\u{01}\"", .invalidString),
        (#""\x""#, .invalidString),
        (#""\ud800""#, .invalidString),
        ("nul", .unexpectedEnd),
        ("true false", .trailingBytes),
        ("not json", .unexpectedByte),
    ])
    func rejectsMalformedDocuments(text: String, code: JSONParseError.Code) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
        do {
            _ = try JSONValue(parsing: text)
        } catch {
            #expect(error.code == code, "\(text.debugDescription): \(error)")
        }
    }

    /// The string scanner reads eight bytes at a time: an escape, a non-ASCII character, a raw control
    /// character or invalid UTF-8 is found wherever it sits in or across those words.
    @Test func findsEveryStringSpecialAtEveryPositionOfTheScannedWords() throws {
        for length in 0..<20 {
            for position in 0...length {
                let before = String(repeating: "a", count: position)
                let after = String(repeating: "b", count: length - position)
                let escaped = try JSONValue(parsing: "\"\(before)\\n\(after)\"")
                #expect(escaped == .string("\(before)\n\(after)"), "escape at \(position) of \(length)")
                let accented = try JSONValue(parsing: "\"\(before)é\(after)\"")
                #expect(accented == .string("\(before)é\(after)"), "é at \(position) of \(length)")
                #expect(throws: JSONParseError(code: .invalidString, byteOffset: position + 1)) {
                    try JSONValue(parsing: "\"\(before)\u{1F}\(after)\"")
                }
                let invalid = [0x22] + Array(before.utf8) + [0xC3, 0x28] + Array(after.utf8) + [0x22]
                #expect(throws: JSONParseError(code: .invalidUTF8, byteOffset: 1)) { try JSONValue(parsing: invalid) }
                let unterminated = "\"\(before)\(after)"
                #expect(throws: JSONParseError(code: .unexpectedEnd, byteOffset: unterminated.utf8.count)) {
                    try JSONValue(parsing: unterminated)
                }
            }
        }
    }

    @Test func rejectsInvalidUTF8InStrings() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        #expect(throws: JSONParseError(code: .invalidUTF8, byteOffset: 1)) { try JSONValue(parsing: bytes) }
    }

    @Test func rejectsNestingDeeperThanTheLimitWithoutCrashing() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        let fine =
            String(repeating: "[", count: JSONValue.maximumDepth)
            + String(repeating: "]", count: JSONValue.maximumDepth)
        #expect(throws: Never.self) { try JSONValue(parsing: fine) }
    }

    @Test func serialisedOutputIsAcceptedByFoundation() throws {
        let value: JSONValue = ["a": ["b": [1, 2.5, "x\u{0}y", nil, true]], "é": "\u{1F}"]
        let object = try JSONSerialization.jsonObject(with: Data(value.serialized())) as? [String: Any]
        #expect(object?["é"] as? String == "\u{1F}")
    }

    @Test func lookupsAnswerTheLastDuplicateMember() throws {
        let value = try JSONValue(parsing: #"{"a":1,"a":2}"#)
        #expect(value["a"] == 2)
    }

    @Test func equalityIsTypeExactAndIgnoresMemberOrder() {
        #expect(JSONValue.integer(1) != .double(1))
        #expect(JSONValue(dictionaryLiteral: ("a", 1), ("b", 2)) == ["b": 2, "a": 1])
    }
}
