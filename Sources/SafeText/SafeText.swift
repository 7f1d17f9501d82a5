/// Text from outside (events, servers, files, the environment) made safe to put into records, logs and errors:
/// bounded in bytes without cutting a character, and with control characters shown rather than acting. The one
/// place for both, so that every record, log line and error cuts and escapes the same way.
package enum SafeText {
    /// What a cut text ends with (U+2026, three bytes of UTF-8).
    package static let ellipsis = "…"

    /// `text` when it has at most `maxBytes` bytes of UTF-8; else its longest prefix of whole characters that
    /// fits with ``ellipsis`` after it, then the ellipsis. With `maxBytes` below the ellipsis's own size, the
    /// ellipsis alone.
    package static func bounded(_ text: String, maxBytes: Int) -> String {
        guard text.utf8.count > max(0, maxBytes) else { return text }
        let room = maxBytes - Self.ellipsis.utf8.count
        var end = text.startIndex
        var bytes = 0
        for index in text.indices {
            let next = text.index(after: index)
            let length = text.utf8.distance(from: index, to: next)
            guard bytes + length <= room else { break }
            bytes += length
            end = next
        }
        return String(text[..<end]) + Self.ellipsis
    }

    /// `text` with its control characters (C0, DEL and C1: Unicode's `Cc`) written as `\u{XX}`, and the scalars of
    /// `extra` too (`\`, so that an escaped text cannot pass for one that was not; `"`, inside quotes), so a log
    /// line, a header or an error shows them instead of acting on them.
    package static func escapingControls(_ text: String, alsoEscaping extra: [Unicode.Scalar] = []) -> String {
        guard text.unicodeScalars.contains(where: { Self.needsEscape($0, extra) }) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if Self.needsEscape(scalar, extra) {
                escaped.append(contentsOf: Self.escape(scalar).unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    /// At most `maxBytes` bytes of `text` with its control characters escaped as ``escapingControls(_:alsoEscaping:)``
    /// does, cut with ``ellipsis`` as ``bounded(_:maxBytes:)`` does; an escape is never cut in two.
    package static func excerpt(_ text: String, maxBytes: Int, alsoEscaping extra: [Unicode.Scalar] = []) -> String {
        var pieces: [(text: String, bytes: Int)] = []
        var total = 0
        for character in text {
            let piece =
                character.unicodeScalars.contains(where: { Self.needsEscape($0, extra) })
                ? character.unicodeScalars.map {
                    Self.needsEscape($0, extra) ? Self.escape($0) : String($0)
                }
                .joined()
                : String(character)
            pieces.append((piece, piece.utf8.count))
            total += piece.utf8.count
            // Escaping never shrinks text: once past the bound, the rest is cut anyway.
            if total > max(0, maxBytes) { break }
        }
        guard total > max(0, maxBytes) else { return pieces.map(\.text).joined() }
        let room = maxBytes - Self.ellipsis.utf8.count
        var kept = ""
        var bytes = 0
        for piece in pieces {
            guard bytes + piece.bytes <= room else { break }
            kept += piece.text
            bytes += piece.bytes
        }
        return kept + Self.ellipsis
    }

    /// ``excerpt(_:maxBytes:alsoEscaping:)`` of bytes read as UTF-8 (invalid sequences become U+FFFD). Only
    /// the bytes that can show are decoded, however many there are.
    package static func excerpt(
        bytes: some Collection<UInt8>, maxBytes: Int, alsoEscaping extra: [Unicode.Scalar] = []
    ) -> String {
        // Decoding never shrinks bytes (an invalid sequence of 1 to 3 bytes becomes U+FFFD, 3 bytes), so a longer
        // input decodes past the bound from this prefix on and is cut; the 4 spare bytes let the last character
        // that fits be whole.
        let prefix = bytes.prefix(min(max(0, maxBytes), Int.max - 4) + 4)
        return Self.excerpt(String(decoding: prefix, as: UTF8.self), maxBytes: maxBytes, alsoEscaping: extra)
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, _ extra: [Unicode.Scalar]) -> Bool {
        scalar.properties.generalCategory == .control || (!extra.isEmpty && extra.contains(scalar))
    }

    private static func escape(_ scalar: Unicode.Scalar) -> String {
        "\\u{\(String(scalar.value, radix: 16))}"
    }
}

/// "Did you mean" for unknown names: keys, values, event fields.
package enum Suggestion {
    /// The candidate `word` abbreviates (three characters or more), or else the one closest to it by edit
    /// distance, ignoring case, when that is close enough to be a likely typo (at most a third of the shorter
    /// word's length, and at least 2).
    package static func closest(to word: String, among candidates: [String]) -> String? {
        let lowered = word.lowercased()
        if lowered.count >= 3, let abbreviated = candidates.first(where: { $0.lowercased().hasPrefix(lowered) }) {
            return abbreviated
        }
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = Self.editDistance(lowered, candidate.lowercased())
            if best.map({ distance < $0.distance }) ?? true {
                best = (candidate, distance)
            }
        }
        guard let best else { return nil }
        let allowed = max(2, min(lowered.count, best.candidate.count) / 3)
        return best.distance <= allowed ? best.candidate : nil
    }

    /// Levenshtein distance (insertions, deletions, substitutions) between `a` and `b`, in characters.
    package static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
