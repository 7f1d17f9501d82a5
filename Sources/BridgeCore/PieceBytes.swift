/// Shares an event's bytes out among its pieces: every piece gets the quotient, the first one the remainder
/// too, so the shares add up to the event's size exactly.
struct PieceBytes {
    private let quotient: Int
    private var remainder: Int

    init(eventBytes: Int, pieces: Int) {
        let pieces = max(1, pieces)
        self.quotient = eventBytes / pieces
        self.remainder = eventBytes % pieces
    }

    mutating func next() -> Int {
        defer { self.remainder = 0 }
        return self.quotient + self.remainder
    }
}
