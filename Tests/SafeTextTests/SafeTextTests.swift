import SafeText
import Testing

@Suite("SafeText: bounds, escapes and suggestions")
struct SafeTextTests {
    @Test("bounded keeps short text, and cuts long text at a character boundary with the ellipsis inside the bound")
    func bounded() {
        #expect(SafeText.bounded("short", maxBytes: 5) == "short")
        #expect(SafeText.bounded("abcdefgh", maxBytes: 7) == "abcd…")
        // é is two bytes and 👍🏽 (one character, two scalars) eight: neither is cut in two.
        for text in ["ééééé", "a👍🏽b👍🏽c", String(repeating: "日本", count: 40)] {
            for bound in 0...20 {
                let cut = SafeText.bounded(text, maxBytes: bound)
                #expect(cut.utf8.count <= max(bound, SafeText.ellipsis.utf8.count), "\(text) at \(bound): \(cut)")
                if text.utf8.count > bound {
                    #expect(cut.hasSuffix(SafeText.ellipsis))
                    #expect(text.hasPrefix(cut.dropLast()), "\(text) at \(bound): \(cut)")
                }
            }
        }
    }

    @Test("escapingControls writes C0, DEL and C1 as \\u{..}, and other scalars only when asked")
    func escapes() {
        #expect(SafeText.escapingControls("a\nb\u{7F}c\u{85}d") == #"a\u{a}b\u{7f}c\u{85}d"#)
        #expect(SafeText.escapingControls(#"a\b"#) == #"a\b"#)
        #expect(SafeText.escapingControls(#"a\b""#, alsoEscaping: ["\\", "\""]) == #"a\u{5c}b\u{22}"#)
        #expect(SafeText.escapingControls("plain é") == "plain é")
    }

    @Test("excerpt escapes, bounds, and never cuts an escape in two")
    func excerpt() {
        #expect(SafeText.excerpt("ok\u{1b}[31m", maxBytes: 100) == #"ok\u{1b}[31m"#)
        let text = String(repeating: "\u{1}", count: 10)
        for bound in 0...40 {
            let cut = SafeText.excerpt(text, maxBytes: bound)
            #expect(cut.utf8.count <= max(bound, 3))
            // Only whole escapes (`\u{1}`, 5 bytes each), then the ellipsis.
            let body = cut.hasSuffix(SafeText.ellipsis) ? String(cut.dropLast()) : cut
            #expect(body == String(repeating: #"\u{1}"#, count: body.utf8.count / 5), "\(bound): \(cut)")
        }
    }

    @Test("excerpt of bytes: invalid UTF-8 replaced, a huge input read only as far as it can show")
    func excerptOfBytes() {
        #expect(SafeText.excerpt(bytes: [0x61, 0xFF, 0x62], maxBytes: 10) == "a\u{FFFD}b")
        let huge = [UInt8](repeating: 0x41, count: 1 << 20)
        let cut = SafeText.excerpt(bytes: huge, maxBytes: 256)
        #expect(cut.utf8.count <= 256)
        #expect(cut.hasSuffix(SafeText.ellipsis))
        #expect(SafeText.excerpt(bytes: huge, maxBytes: Int.max).utf8.count == 1 << 20)
        #expect(SafeText.excerpt(bytes: [UInt8](), maxBytes: -1) == "")
    }

    @Test("Suggestion: an abbreviation, a typo, or nothing")
    func suggestion() {
        let names = ["alert", "background", "liveactivity", "voip"]
        #expect(Suggestion.closest(to: "back", among: names) == "background")
        #expect(Suggestion.closest(to: "alret", among: names) == "alert")
        #expect(Suggestion.closest(to: "LiveActivty", among: names) == "liveactivity")
        #expect(Suggestion.closest(to: "zzzzzzzz", among: names) == nil)
        #expect(Suggestion.closest(to: "x", among: []) == nil)
    }
}
