/// "Did you mean" for unknown keys and values.
enum Suggestion {
    /// The candidate `word` abbreviates, or else the one closest to it by edit distance when that is close
    /// enough to be a likely typo.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let lowered = word.lowercased()
        if lowered.count >= 3, let abbreviated = candidates.first(where: { $0.lowercased().hasPrefix(lowered) }) {
            return abbreviated
        }
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = self.editDistance(lowered, candidate.lowercased())
            if best == nil || distance < best!.distance {
                best = (candidate, distance)
            }
        }
        guard let best else {
            return nil
        }
        let allowed = max(2, min(lowered.count, best.candidate.count) / 3)
        return best.distance <= allowed ? best.candidate : nil
    }

    /// Levenshtein distance (insertions, deletions, substitutions) between `a` and `b`.
    static func editDistance(_ a: String, _ b: String) -> Int {
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
