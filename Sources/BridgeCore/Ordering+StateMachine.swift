import DequeModule

/// Per-key lines of a route with `ordering_key` (docs/configuration.md, "Per-key order"): at most one item of a key is in flight,
/// the next waits for the previous one's final outcome, and items of one key go out in the order they arrived.
/// With `coalesce`, a newer arrival replaces the item waiting in its line, so at most one waits per key.
///
/// A value without I/O, like ``DeliveryStateMachine`` and ``FlowControl``: the pipeline keeps it in a lock and
/// does what each answer says outside the lock.
///
/// **Hand-over.** An item this machine returns from ``finished(key:)`` or ``handedOver(key:)`` is the line's item
/// in flight from then on; the caller hands it over (sends it, finishes it, or gives it a task) and then calls
/// ``handedOver(key:)``, which may return the next item: the caller loops until it returns `nil`. An item's final
/// outcome can be decided during its own hand-over (an answer before the send call returned, on another thread or
/// on the caller's own, or an item that expired while it waited); ``finished(key:)`` then leaves the next item to
/// the caller's loop instead of returning it. So the lines advance by a loop, never by recursion through the
/// sender's completion, whatever the sender does.
struct OrderingStateMachine<Key: Hashable & Sendable, Item: Sendable>: Sendable {
    /// Where a line's item in flight is.
    enum Phase: Sendable, Hashable {
        /// Taken into flight: sent, or waiting in a task for a retry or the halt gate.
        case inFlight
        /// Returned to a caller that is handing it over; ``handedOver(key:)`` has not come yet.
        case handingOver
        /// Its final outcome came before its hand-over ended; ``handedOver(key:)`` moves the line on.
        case finishedWhileHandingOver
    }

    /// One key's line: its item in flight and those waiting, oldest first.
    struct Line: Sendable {
        var phase: Phase
        var waiting: Deque<Item>
    }

    /// What to do with an arriving item.
    enum Arrival: Sendable {
        /// The key's line was empty: the item is in flight now; send it.
        case send
        /// The item waits behind the key's item in flight. With `coalesce`, the items it replaced: they left
        /// the line and end `superseded`, naming the arriving item.
        case wait(replacing: [Item])
    }

    /// Lines with an item in flight; a key without one has no entry, so memory follows what is in flight.
    private(set) var lines: [Key: Line] = [:]
    /// Items waiting in all lines (not counting those in flight).
    private(set) var waitingCount = 0

    init() {}

    /// The items waiting in `key`'s line (0 when it has none, or no line).
    func waitingCount(for key: Key) -> Int {
        self.lines[key]?.waiting.count ?? 0
    }

    /// The most items waiting in one line (0 when none waits): the deepest line, found by looking at every line, so
    /// for a gauge read every few seconds, not for every item.
    var deepestWaiting: Int {
        guard self.waitingCount > 0 else { return 0 }
        return self.lines.values.reduce(0) { max($0, $1.waiting.count) }
    }

    /// An item of `key` arrives, after every earlier item of `key`.
    mutating func arrive(_ item: Item, key: Key, coalesce: Bool) -> Arrival {
        guard var line = self.lines.removeValue(forKey: key) else {
            self.lines[key] = Line(phase: .inFlight, waiting: [])
            return .send
        }
        defer { self.lines[key] = line }
        var replaced: [Item] = []
        if coalesce, !line.waiting.isEmpty {
            replaced = Array(line.waiting)
            line.waiting.removeAll()
            self.waitingCount -= replaced.count
        }
        line.waiting.append(item)
        self.waitingCount += 1
        return .wait(replacing: replaced)
    }

    /// The item in flight of `key` has its final outcome. Returns the next item to hand over (see the type's
    /// discussion), or `nil` when the line is empty (it is then removed) or its hand-over is still going on.
    mutating func finished(key: Key) -> Item? {
        guard let phase = self.lines[key]?.phase else { return nil }
        switch phase {
        case .inFlight:
            return self.advance(key)
        case .handingOver:
            self.lines[key]?.phase = .finishedWhileHandingOver
            return nil
        case .finishedWhileHandingOver:
            return nil  // finished twice: the caller's bug; the line must not move twice
        }
    }

    /// The hand-over of the item returned for `key` ended. Returns the next item when that item's outcome came
    /// meanwhile, else `nil`.
    mutating func handedOver(key: Key) -> Item? {
        guard let phase = self.lines[key]?.phase else { return nil }
        switch phase {
        case .handingOver:
            self.lines[key]?.phase = .inFlight
            return nil
        case .finishedWhileHandingOver:
            return self.advance(key)
        case .inFlight:
            return nil
        }
    }

    /// Takes every waiting item `shouldRemove` picks out of its line, in any line, and returns them: they will not be
    /// sent (a revoked partition's items, which its next owner sends again in order). Items in flight stay; a line
    /// keeps its other waiting items in their order.
    mutating func removeWaiting(where shouldRemove: (Item) -> Bool) -> [Item] {
        guard self.waitingCount > 0 else { return [] }
        var removed: [Item] = []
        for key in Array(self.lines.keys) {
            guard var line = self.lines[key], !line.waiting.isEmpty else { continue }
            let before = line.waiting.count
            var kept = Deque<Item>()
            for item in line.waiting {
                if shouldRemove(item) { removed.append(item) } else { kept.append(item) }
            }
            guard kept.count != before else { continue }
            line.waiting = kept
            self.lines[key] = line
        }
        self.waitingCount -= removed.count
        return removed
    }

    /// The line's oldest waiting item becomes its item in flight, being handed over; an empty line is removed.
    private mutating func advance(_ key: Key) -> Item? {
        guard var line = self.lines.removeValue(forKey: key) else { return nil }
        guard let next = line.waiting.popFirst() else { return nil }
        self.waitingCount -= 1
        line.phase = .handingOver
        self.lines[key] = line
        return next
    }
}
