import DequeModule

/// Which consumed offsets of one partition are finished, and so how far the partition may be committed.
///
/// An event is *finished* when every record it causes (outcomes, invalid tokens, a dead letter) has been
/// acknowledged by Kafka, or when it caused none (no route matched). Events finish out of order, since
/// notifications to different devices take different times; the commit position only moves over a run of
/// finished events, so a crash never skips an unfinished one (docs/operations.md, "Guarantees": at-least-once).
///
/// Offsets are registered in increasing order (Kafka delivers a partition in order) but need not be
/// contiguous: compaction and transaction markers leave gaps.
struct PartitionProgress: Sendable {
    private struct Entry: Sendable {
        var offset: Int64
        var finished: Bool
        /// Pieces of the event (its notifications and dead letters) not yet finished.
        var pieces: Int
        /// When it was registered (not a `ContinuousClock.Instant`, whose layout is known only at run time; see
        /// ``MonotonicTime``).
        var begun: MonotonicTime
        /// A piece of it was dropped (``abandonPiece(offset:)``): it never finishes here.
        var abandoned = false
    }

    /// Unfinished events and finished ones still behind an unfinished one, oldest first.
    private var entries: Deque<Entry> = []

    /// The offset to commit: one past the last event of the finished run at the front, or `nil` while no
    /// event has finished since the partition was assigned.
    private(set) var commitOffset: Int64?

    /// The number of consumed events not yet finished.
    private(set) var unfinishedCount = 0

    /// Unfinished events with a dropped piece: they never finish here, so nothing waits for them.
    private(set) var abandonedCount = 0

    /// Unfinished events that can still finish: what a drain waits for.
    var awaitedCount: Int { self.unfinishedCount - self.abandonedCount }

    init() {}

    /// Registers a consumed event of `pieces` pieces at `now` (see ``finishPiece(offset:)``). Offsets must
    /// increase: a repeated or older offset (or one at or below the commit position) is refused with `false` and
    /// changes nothing, since registering it would let the commit position move backwards or skip.
    @discardableResult
    mutating func begin(offset: Int64, pieces: Int = 1, at now: ContinuousClock.Instant = .now) -> Bool {
        if let last = self.entries.last, last.offset >= offset { return false }
        if let commit = self.commitOffset, offset < commit { return false }
        self.entries.append(Entry(offset: offset, finished: false, pieces: pieces, begun: MonotonicTime(now)))
        self.unfinishedCount += 1
        return true
    }

    /// When the oldest unfinished event was registered; `nil` when every event is finished.
    var oldestUnfinishedSince: ContinuousClock.Instant? {
        // The front entry is unfinished whenever there is one: finished entries at the front are dropped.
        self.entries.first?.begun.instant
    }

    /// Marks the event at `offset` finished. Returns `true` when ``commitOffset`` moved.
    ///
    /// Finishing an offset that was never begun, or twice, is ignored and returns `false`: a late
    /// acknowledgement for a partition that was revoked and re-assigned must not corrupt the new state.
    @discardableResult
    mutating func finish(offset: Int64) -> Bool {
        guard let index = self.index(of: offset), !self.entries[index].finished else {
            return false
        }
        return self.finish(at: index)
    }

    /// One piece of the event at `offset` is finished; the last one finishes the event (``finish(offset:)``).
    /// Returns `true` when ``commitOffset`` moved. The piece count lives in the event's entry, found by its
    /// distance from the oldest: no table per offset on the way of every notification.
    @discardableResult
    mutating func finishPiece(offset: Int64) -> Bool {
        guard let index = self.index(of: offset), !self.entries[index].finished else {
            return false
        }
        if self.entries[index].pieces > 1 || self.entries[index].abandoned {
            self.entries[index].pieces -= 1
            return false
        }
        return self.finish(at: index)
    }

    /// One piece of the event at `offset` will never finish (dropped before it was sent): the event stays
    /// unfinished, and so uncommitted, for good, and its other pieces no longer finish it. Returns whether the event
    /// was found unfinished.
    @discardableResult
    mutating func abandonPiece(offset: Int64) -> Bool {
        guard let index = self.index(of: offset), !self.entries[index].finished else { return false }
        self.entries[index].pieces = max(0, self.entries[index].pieces - 1)
        if !self.entries[index].abandoned {
            self.entries[index].abandoned = true
            self.abandonedCount += 1
        }
        return true
    }

    private mutating func finish(at index: Int) -> Bool {
        self.entries[index].finished = true
        self.unfinishedCount -= 1
        var advanced = false
        while let first = self.entries.first, first.finished {
            self.entries.removeFirst()
            // An offset comes from the broker and can be the last Int64; there is nothing past it to commit, so
            // that event would be read again after a restart rather than crash the bridge here.
            self.commitOffset = first.offset == .max ? .max : first.offset + 1
            advanced = true
        }
        return advanced
    }

    /// Where `offset` is, first by its distance from the front (right whenever the offsets in between are
    /// contiguous, as they are in a partition without compaction or transactions), else by binary search: entries
    /// are sorted by offset. Runs once per acknowledged event, over up to `max_in_flight` entries.
    private func index(of offset: Int64) -> Int? {
        guard let front = self.entries.first?.offset, offset >= front else { return nil }
        // Offsets come from the broker: the distance between two of them can overflow, and then it is no guess.
        let (distance, overflow) = offset.subtractingReportingOverflow(front)
        if !overflow, distance < Int64(self.entries.count) {
            let guess = Int(distance)
            if self.entries[guess].offset == offset { return guess }
        }
        var low = self.entries.startIndex
        var high = overflow ? self.entries.endIndex : Swift.min(self.entries.endIndex, Int(clamping: distance) &+ 1)
        while low < high {
            let middle = low + (high - low) / 2
            let value = self.entries[middle].offset
            if value == offset {
                return middle
            } else if value < offset {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return nil
    }
}
