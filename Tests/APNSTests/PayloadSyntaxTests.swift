import APNSSimulator
import Foundation
import Testing

@testable import APNSCore

/// `validatePayload` reads common payloads with its own scanner and asks `JSONSerialization` about the rest; its
/// verdict must stay exactly `JSONSerialization`'s. That holds as long as the scanner accepts only what
/// `JSONSerialization` accepts, which these tests check on typical payloads, edge cases and random documents.
@Suite("Payload syntax")
struct PayloadSyntaxTests {
    static func foundationAccepts(_ bytes: [UInt8]) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) is [String: Any]
    }

    static func scannerAccepts(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer(PayloadSyntax.isPlainObject)
    }

    static let typicalPayloads = [
        #"{"aps":{"alert":{"title":"Your order 100000 has shipped","body":"Demo Express expects to deliver it "#
            + #"tomorrow"},"badge":0,"sound":"default"},"order_id":100000}"#,
        #"{"aps":{"content-available":1}}"#,
        "{}",
        " {\n\t\"a\" : [ ] ,\r\n \"b\":{} } \n",
        #"{"aps":{"alert":"Grüße aus Köln 🎉","sound":"default"},"city":"東京"}"#,
        #"{"a":[true,false,null,-0,0.5,1e10,-2.5E-3,1E+2,123456789012345678],"b":"\"\\\/\b\f\n\r\t\u00e9\u0000"}"#,
        #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"progress":0.42,"steps":[[1],[2]]}}}"#,
        "{\"a\":\"\u{7F}\u{FFFE}\"}",
    ]

    @Test("typical payloads are read by the scanner, without Foundation", arguments: Self.typicalPayloads)
    func typicalPayloadTakesTheScanner(payload: String) {
        #expect(Self.scannerAccepts(Array(payload.utf8)))
        #expect(Self.foundationAccepts(Array(payload.utf8)))
    }

    /// Documents outside the scanner's subset, with what JSONSerialization answers (on Linux, for these bytes).
    static let edgeCases: [(bytes: [UInt8], foundation: Bool)] = [
        (Array(#"{"a":[1,]}"#.utf8), true),  // a trailing comma: Foundation tolerates it, RFC 8259 does not
        ([0xEF, 0xBB, 0xBF] + Array("{}".utf8), true),  // a byte-order mark
        (Array(#"{"a":1e-400}"#.utf8), true),
        (Array(#"{"a":1E400}"#.utf8), false),
        (Array(#"{"a":123456789012345678901234567890}"#.utf8), true),
        (Array(#"{"a":"\ud83d\ude00"}"#.utf8), true),
        (Array(#"{"a":"\ud800"}"#.utf8), false),
        (Array(#"{"a":"\udc00x"}"#.utf8), false),
        (Array("{\"a\":\"\t\"}".utf8), false),
        (Array(#"{"a":01}"#.utf8), false),
        (Array(#"{"a":1.}"#.utf8), false),
        (Array(#"{"a":.5}"#.utf8), false),
        (Array(#"{"a":+1}"#.utf8), false),
        (Array(#"{"a":tru}"#.utf8), false),
        (Array("{}\u{0}".utf8), false),
        (Array(#"{"a":"\uZZZZ"}"#.utf8), false),
        (Array("[{}]".utf8), false),
        (Array(#""{}""#.utf8), false),
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC0, 0xAF, 0x22, 0x7D], false),  // an overlong "/"
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x7D], false),  // an encoded surrogate
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xF4, 0x90, 0x80, 0x80, 0x22, 0x7D], false),  // past U+10FFFF
        (Array(("{\"a\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}").utf8), true),
    ]

    @Test("outside the scanner's subset, validatePayload answers as JSONSerialization", arguments: Self.edgeCases)
    func edgeCaseGetsFoundationsVerdict(bytes: [UInt8], foundation: Bool) {
        #expect(Self.foundationAccepts(bytes) == foundation)
        #expect(!Self.scannerAccepts(bytes))
        #expect((NotificationValidation.validatePayload(bytes, pushType: .alert) == nil) == foundation)
    }

    @Test("on random documents and their mutations, the scanner accepts only what JSONSerialization accepts")
    func randomDocuments() {
        var documents = DocumentGenerator(seed: 12)
        var mutated = 0
        for _ in 0..<1500 {
            let document = Array(documents.object(depth: 0).utf8)
            // The generator writes only inside the subset, so the scanner must take every document itself.
            #expect(Self.scannerAccepts(document), "\(String(decoding: document, as: UTF8.self))")
            #expect(Self.foundationAccepts(document))
            for _ in 0..<4 {
                let mutant = documents.mutate(document)
                if Self.scannerAccepts(mutant) {
                    #expect(Self.foundationAccepts(mutant), "\(String(decoding: mutant, as: UTF8.self))")
                } else {
                    mutated += 1
                }
            }
        }
        // The mutations do break documents (else this test would check nothing outside the subset).
        #expect(mutated > 1000)
    }
}

/// Random JSON objects inside the scanner's subset, and byte-level mutations of them.
struct DocumentGenerator {
    private var random: SplitMix64

    init(seed: UInt64) {
        self.random = SplitMix64(seed: seed)
    }

    private mutating func below(_ bound: Int) -> Int { Int(self.random.next() % UInt64(bound)) }

    private mutating func pick<T>(_ choices: [T]) -> T { choices[self.below(choices.count)] }

    private mutating func space() -> String { self.pick(["", "", " ", "\n", "\t", "\r\n  "]) }

    mutating func object(depth: Int) -> String {
        let members = (0..<self.below(4)).map { _ in
            self.space() + self.string() + self.space() + ":" + self.space() + self.value(depth: depth + 1)
                + self.space()
        }
        return "{" + members.joined(separator: ",") + self.space() + "}"
    }

    private mutating func array(depth: Int) -> String {
        let elements = (0..<self.below(4)).map { _ in self.space() + self.value(depth: depth + 1) + self.space() }
        return "[" + elements.joined(separator: ",") + self.space() + "]"
    }

    private mutating func value(depth: Int) -> String {
        switch self.below(depth < 5 ? 9 : 7) {
        case 0, 1: return self.string()
        case 2, 3: return self.number()
        case 4: return "true"
        case 5: return "false"
        case 6: return "null"
        case 7: return self.object(depth: depth)
        default: return self.array(depth: depth)
        }
    }

    private mutating func digits(_ count: Int, leadingZero: Bool) -> String {
        (0..<count).map { index in String(index == 0 && !leadingZero ? 1 + self.below(9) : self.below(10)) }.joined()
    }

    private mutating func number() -> String {
        var text = self.pick(["", "-"])
        text += self.below(4) == 0 ? "0" : self.digits(1 + self.below(8), leadingZero: false)
        if self.below(2) == 0 { text += "." + self.digits(1 + self.below(8), leadingZero: true) }
        if self.below(3) == 0 {
            text +=
                self.pick(["e", "E"]) + self.pick(["", "+", "-"]) + self.digits(1 + self.below(2), leadingZero: true)
        }
        return text
    }

    private mutating func string() -> String {
        let pieces = (0..<self.below(6)).map { _ in
            self.pick([
                "a", "order", " ", "é", "東京", "🎉", "\u{7F}", #"\""#, #"\\"#, #"\/"#, #"\n"#, #"\t"#, #"\u00e9"#,
                #"\u20AC"#,
            ])
        }
        return "\"" + pieces.joined() + "\""
    }

    /// `document` with one byte deleted, replaced or inserted, or a slice repeated.
    mutating func mutate(_ document: [UInt8]) -> [UInt8] {
        let interesting: [UInt8] =
            Array(#",:[]{}"\0e-.+u"#.utf8) + [0x00, 0x09, 0x1F, 0x80, 0xBF, 0xC0, 0xED, 0xF4, 0xFF]
        var bytes = document
        let position = self.below(bytes.count)
        switch self.below(4) {
        case 0: bytes.remove(at: position)
        case 1: bytes[position] = self.pick(interesting)
        case 2: bytes.insert(self.pick(interesting), at: position)
        default:
            let end = min(bytes.count, position + 1 + self.below(8))
            bytes.insert(contentsOf: bytes[position..<end], at: position)
        }
        return bytes
    }
}
