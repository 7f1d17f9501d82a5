/// The latest entries of a stream that does not end, for statistics that must not grow with traffic: the last
/// `limit` entries are kept, oldest first, and ``total`` counts every entry ever appended.
package struct RecentEntries<Element: Sendable & Hashable>: Sendable, Hashable {
    /// The most entries ``elements`` holds (0: none, only ``total`` counts).
    package let limit: Int
    /// Entries appended so far, including those no longer kept.
    package private(set) var total = 0
    /// The kept entries and at most `limit` older ones: dropping `limit` of them at once every `limit` appends
    /// keeps an append amortised O(1), where dropping the oldest one per append would move the whole array.
    private var storage: [Element] = []

    /// An empty list keeping at most `limit` entries.
    package init(limit: Int) {
        precondition(limit >= 0, "a negative limit")
        self.limit = limit
    }

    /// The kept entries, oldest first: the last ``limit`` appended (all of them while there were fewer).
    package var elements: [Element] { Array(self.storage.suffix(self.limit)) }

    /// Appends `element`, forgetting the oldest entries beyond the limit.
    package mutating func append(_ element: Element) {
        self.total += 1
        guard self.limit > 0 else { return }
        if self.storage.count >= 2 * self.limit { self.storage.removeFirst(self.storage.count - self.limit) }
        self.storage.append(element)
    }

    /// Equal when the same entries are kept and as many were appended (how the storage holds them does not count).
    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.limit == rhs.limit && lhs.total == rhs.total && lhs.elements == rhs.elements
    }

    /// Hashes what ``==`` compares.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.limit)
        hasher.combine(self.total)
        hasher.combine(self.elements)
    }
}
