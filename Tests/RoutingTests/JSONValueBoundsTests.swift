import Foundation
import Routing
import Testing

/// The event parser's memory is proportional to its input, and every hostile shape has a defined answer.
///
/// Memory is measured structurally, not with a process-wide allocator counter (tests run in parallel): the
/// heap bytes a parsed tree holds are the sum of its arrays' capacities times their element strides and its
/// out-of-line strings' lengths, each allocation rounded as glibc's malloc rounds it (16 bytes of overhead,
/// 16-byte granularity, 32 bytes at least).
@Suite struct JSONValueBoundsTests {
    /// Tree bytes allowed per input byte (docs/templates.md, "Event size and memory").
    static let bytesPerInputByte = 32

    static func mallocBytes(_ requested: Int) -> Int {
        max(32, (requested + 8 + 15) & ~15)
    }

    /// Heap bytes held by `value`'s tree (the root's own inline storage not counted).
    static func heapBytes(_ value: JSONValue) -> Int {
        switch value {
        case .string(let string):
            return Self.stringBytes(string)
        case .array(let elements):
            let own =
                elements.capacity == 0 ? 0 : Self.mallocBytes(32 + elements.capacity * MemoryLayout<JSONValue>.stride)
            return own + elements.reduce(0) { $0 + Self.heapBytes($1) }
        case .object(let members):
            let stride = MemoryLayout<(key: String, value: JSONValue)>.stride
            let own = members.capacity == 0 ? 0 : Self.mallocBytes(32 + members.capacity * stride)
            return own + members.reduce(0) { $0 + Self.stringBytes($1.key) + Self.heapBytes($1.value) }
        default:
            return 0
        }
    }

    /// Strings of up to 15 UTF-8 bytes are stored inline; longer ones in a heap object with a 32-byte header.
    static func stringBytes(_ string: String) -> Int {
        string.utf8.count <= 15 ? 0 : Self.mallocBytes(32 + string.utf8.count + 1)
    }

    /// At least `size` bytes of `[item,item,...]`, with one element more than a power of two: arrays grow by
    /// doubling, so that count leaves the most spare capacity, the worst case.
    static func array(of item: String, size: Int) -> [UInt8] {
        var count = 1
        while count * (item.utf8.count + 1) < size { count *= 2 }
        return Array(("[" + Array(repeating: item, count: count + 1).joined(separator: ",") + "]").utf8)
    }

    /// Hostile shapes of about a megabyte, by name (the names are the test arguments: Swift Testing prints
    /// arguments, and a megabyte of them would drown the log).
    static let shapes: [String: @Sendable () -> [UInt8]] = [
        "empty objects (3 MB)": { array(of: "{}", size: 3_000_000) },
        "zeros": { array(of: "0", size: 1_000_000) },
        "one-element arrays": { array(of: "[0]", size: 1_000_000) },
        "one-member objects": { array(of: #"{"":0}"#, size: 1_000_000) },
        "two-member objects": { array(of: #"{"a":0,"b":1}"#, size: 1_000_000) },
        "16-byte strings": { array(of: #""abcdefghijklmnop""#, size: 1_000_000) },
        "doubles": { array(of: "1.5", size: 1_000_000) },
        "nested pairs": { array(of: "[[],{}]", size: 1_000_000) },
        "a long string": { Array(#""\#(String(repeating: "s", count: 1_000_000))""#.utf8) },
        "a long key": { Array(#"{"\#(String(repeating: "k", count: 1_000_000))":true}"#.utf8) },
        "keys of 16 bytes": {
            let members = (0...65_536).map { #""key-\#(String(format: "%011d", $0))":0"# }
            return Array(("{" + members.joined(separator: ",") + "}").utf8)
        },
    ]

    @Test(arguments: Self.shapes.keys.sorted())
    func theParsedTreeTakesAtMost32BytesPerInputByte(shape: String) throws {
        let make = try #require(Self.shapes[shape])
        let bytes = make()
        let heap = Self.heapBytes(try JSONValue(parsing: bytes))
        // Measured: 22 for one-element arrays (the worst), 15 for one-member objects, 12 for zeros, 8 for
        // empty objects, 1 to 5 for strings and keys.
        #expect(heap <= Self.bytesPerInputByte * bytes.count, "\(shape): \(heap) bytes for \(bytes.count)")
    }

    @Test func aThreeMegabyteArrayOfEmptyObjectsTakesTensOfMegabytesNotHundreds() throws {
        let bytes = Self.array(of: "{}", size: 3_000_000)
        let heap = Self.heapBytes(try JSONValue(parsing: bytes))
        // 1 048 577 elements of 24 bytes in one array whose capacity doubling may leave up to twice that (seen:
        // 25 MB and 50 MB depending on how the allocator grew it); empty objects allocate nothing. Before the
        // parser was bounded, the same event took 407 MB.
        #expect(heap < 64_000_000, "\(heap)")
    }

    @Test func containersHoldAtMostTwiceTheirElementsAndEmptyOnesNothing() throws {
        let value = try JSONValue(parsing: #"[[1,2,3,4,5],{"a":1,"b":2,"c":3,"d":4,"e":5},[],{}]"#)
        guard case .array(let outer) = value, case .array(let five) = outer[0], case .object(let members) = outer[1],
            case .array(let empty) = outer[2], case .object(let none) = outer[3]
        else {
            Issue.record("unexpected shape: \(value)")
            return
        }
        #expect(outer.capacity <= 2 * 4)
        #expect(five.capacity <= 2 * 5)
        #expect(members.capacity <= 2 * 5)
        #expect(empty.capacity == 0 && none.capacity == 0)
    }

    // MARK: Depth

    @Test func nestingUpToTheMaximumDepthParses() throws {
        let depth = JSONValue.maximumDepth
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(throws: Never.self) { try JSONValue(parsing: text) }
        let objects = String(repeating: #"{"a":"#, count: depth) + "0" + String(repeating: "}", count: depth)
        #expect(throws: Never.self) { try JSONValue(parsing: objects) }
    }

    @Test(arguments: [JSONValue.maximumDepth + 1, 100_000])
    func deeperNestingIsRefusedBeforeItCanExhaustTheStack(depth: Int) {
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(throws: JSONParseError(code: .tooDeep, byteOffset: JSONValue.maximumDepth)) {
            try JSONValue(parsing: text)
        }
    }

    // MARK: Strings

    @Test(
        arguments: [
            ("overlong slash", [0xC0, 0xAF]),
            ("overlong three bytes", [0xE0, 0x80, 0xAF]),
            ("surrogate", [0xED, 0xA0, 0x80]),
            ("beyond U+10FFFF", [0xF4, 0x90, 0x80, 0x80]),
            ("lone continuation", [0x80]),
            ("truncated sequence", [0xE2, 0x82]),
            ("invalid lead", [0xFF]),
        ] as [(String, [UInt8])])
    func invalidUTF8IsRefusedInValuesAndKeysBuiltOrNot(name: String, sequence: [UInt8]) {
        let inValue = Array(#"{"a":"x"#.utf8) + sequence + Array(#"y"}"#.utf8)
        let inKey = Array(#"{"x"#.utf8) + sequence + Array(#"":1}"#.utf8)
        let inLongValue = Array(#"{"a":""#.utf8) + Array(repeating: 0x61, count: 40) + sequence + Array(#""}"#.utf8)
        for bytes in [inValue, inKey, inLongValue] {
            #expect(throws: JSONParseError.self, "\(name)") { try JSONValue(parsing: bytes) }
            do {
                _ = try JSONValue(parsing: bytes)
            } catch {
                #expect(error.code == .invalidUTF8, "\(name)")
            }
        }
        // An event whose unread fields hold the same bytes is refused just the same.
        let router = try? Router(
            routes: [
                RouteSpec(name: "r", inputTopic: "t", deviceTokens: "{{token}}", topic: "com.x", payload: ["a": 1])
            ])
        let mapping = router?.map(
            event: SourceEvent(
                topic: "t", partition: 0, offset: 0, value: Array(#"{"token":"t","u":"#.utf8) + inValue.dropFirst(5)))
        guard case .deadLetter(let reason)? = mapping?.first?.outcome else {
            Issue.record("\(name): not a dead letter")
            return
        }
        #expect(reason.code == .notJSON, "\(name)")
    }

    @Test func aHugeStringAndAHugeKeyParseToThemselves() throws {
        let long = String(repeating: "é", count: 2_000_000)
        let value = try JSONValue(parsing: #"{"\#(long)":"\#(long)"}"#)
        #expect(value[long] == .string(long))
    }

    // MARK: Numbers

    @Test(arguments: [
        ("1e999999", [String]()), ("[0,1,-1e999999]", ["2"]), (#"{"a":{"b":[{"c":1e400}]}}"#, ["a", "b", "0", "c"]),
        (String(repeating: "9", count: 400), []), (#"{"k\n\"":[1e309]}"#, ["k\n\"", "0"]),
    ])
    func numbersBeyondTheDoubleRangeAreRefusedWithTheirPath(text: String, path: [String]) {
        do {
            _ = try JSONValue(parsing: text)
            Issue.record("\(text) parsed")
        } catch {
            #expect(error.code == .numberOutOfRange)
            #expect(error.path == path)
        }
    }

    @Test func aPathIsWrittenDottedWithControlCharactersEscaped() {
        let error = JSONParseError(code: .numberOutOfRange, byteOffset: 9, path: ["k\n\"", "0"])
        #expect(error.pathText == #"k\n\".0"#)
        #expect(JSONParseError(code: .numberOutOfRange, byteOffset: 0).pathText == "the top level")
        #expect(error.description == #"number out of range at k\n\".0 at byte 9"#)
    }

    @Test func aNumberWithAMillionDigitsIsReadInLinearTime() throws {
        // 10^999999 as digits, and the same digits as a fraction: one is out of range, the other a value.
        let digits = "1" + String(repeating: "0", count: 999_999)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: digits) }
        #expect(try JSONValue(parsing: "0." + digits) == .double(0.1))
        #expect(try JSONValue(parsing: digits + "e-999990") == .double(1e9))
    }
}
