import APNSSimulator
import Testing

/// The bounded list behind the binary gateway's statistics.
@Suite("Recent entries")
struct RecentEntriesTests {
    @Test("it keeps the last entries up to its limit, oldest first, and counts every entry")
    func keepsTheLatest() {
        var entries = RecentEntries<Int>(limit: 10)
        for entry in 0..<3 { entries.append(entry) }
        #expect(entries.elements == [0, 1, 2], "fewer than the limit: all of them")
        for entry in 3..<100_000 { entries.append(entry) }
        #expect(entries.elements == Array(99_990..<100_000))
        #expect(entries.total == 100_000)
    }

    @Test("lists holding the same entries are equal, however their storage was trimmed")
    func equality() {
        var trimmed = RecentEntries<Int>(limit: 2)
        var fresh = RecentEntries<Int>(limit: 2)
        for entry in 0..<5 { trimmed.append(entry) }
        for entry in [9, 9, 9, 3, 4] { fresh.append(entry) }
        #expect(trimmed == fresh)
        #expect(trimmed.hashValue == fresh.hashValue)
    }

    @Test("a limit of zero keeps nothing and still counts")
    func zeroLimit() {
        var entries = RecentEntries<Int>(limit: 0)
        for entry in 0..<5 { entries.append(entry) }
        #expect(entries.elements.isEmpty)
        #expect(entries.total == 5)
    }
}
