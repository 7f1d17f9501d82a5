import DequeModule

/// What one binary connection has written and not yet confirmed, and what each event on the connection means
/// for it. A value with no I/O: the connection feeds it writes, the clock, error packets and closes, and does
/// what it answers.
///
/// The protocol never acknowledges success. A notification counts as delivered once no error for it can still
/// arrive: when its bytes have been in the socket for `quietWindow` with the connection open, or earlier when an
/// error packet names a later notification. Handing bytes to the connection is not writing them: a gateway that
/// stops reading leaves them in the process, and their quiet window starts only once the connection reports them
/// written (``written(through:at:)``). On an error packet the gateway has discarded everything written after the
/// named notification: those are sent again (on a new connection, with new identifiers) and are not counted
/// as attempts. A connection that closes without a packet leaves everything unconfirmed in doubt: it is sent
/// again, but at most `maxResendsWithoutError` times per notification, so one the gateway drops silently
/// (the simple format has no error packets) cannot loop forever.
///
/// Identifiers are consecutive per connection, starting at 1, so the entry an error names is found by
/// subtraction; at most `capacity` are unconfirmed at a time (the writer waits for room), far below the 2^31
/// that wrapping comparison needs.
package struct BinaryWriteWindow<Item: Sendable>: Sendable {
    /// A written notification.
    package struct Entry: Sendable {
        /// Its identifier on this connection.
        package var identifier: UInt32
        /// When its bytes were written into the socket; `nil` while they wait in the process.
        package var writtenAt: ContinuousClock.Instant?
        /// The caller's notification.
        package var item: Item
        /// How many connections closed without an error packet while it was unconfirmed.
        package var resendsWithoutError: Int
    }

    /// A notification to write again on the next connection.
    package struct Resend: Sendable {
        /// The caller's notification.
        package var item: Item
        /// Carried to the next window (see ``BinaryWriteWindow/write(_:now:resendsWithoutError:)``).
        package var resendsWithoutError: Int
    }

    /// What an error packet or a close settles.
    package struct Settlement: Sendable {
        /// Confirmed: written before the one that failed, or processed (a shutdown names the last one).
        package var delivered: [Item] = []
        /// The notification the packet names, with what its status means (none when the packet names one
        /// already confirmed or never written, or the connection closed without a packet).
        package var failed: (item: Item, verdict: BinaryVerdict)?
        /// Discarded by the gateway or in doubt: to be written again.
        package var resend: [Resend] = []
        /// In doubt once too often: to be reported lost.
        package var lost: [Item] = []
    }

    /// The most unconfirmed notifications; ``isFull`` tells the writer to wait.
    package let capacity: Int
    /// How long a written notification waits for an error packet before it counts as delivered.
    package let quietWindow: Duration
    /// How many closes without an error packet a notification may be in doubt through before it is lost.
    package let maxResendsWithoutError: Int

    private var entries: Deque<Entry> = []
    /// The identifier the next ``write(_:now:resendsWithoutError:)`` returns (to encode before recording).
    package private(set) var nextIdentifier: UInt32 = 1

    /// Creates the window of a new connection; its first notification gets `firstIdentifier`.
    package init(capacity: Int, quietWindow: Duration, maxResendsWithoutError: Int, firstIdentifier: UInt32 = 1) {
        precondition(capacity > 0 && capacity < Int(Int32.max), "the window holds 1 to 2^31-1 notifications")
        self.capacity = capacity
        self.quietWindow = quietWindow
        self.maxResendsWithoutError = maxResendsWithoutError
        self.nextIdentifier = firstIdentifier
    }

    /// Unconfirmed notifications.
    package var count: Int { self.entries.count }
    /// Whether the writer must wait for confirmations before writing more.
    package var isFull: Bool { self.entries.count >= self.capacity }
    /// The unconfirmed notifications, oldest first.
    package var unconfirmed: some Collection<Entry> { self.entries }
    /// When the oldest unconfirmed notification counts as delivered, if nothing fails first; `nil` when nothing
    /// is unconfirmed or the oldest one's bytes have not been written yet.
    package var nextConfirmation: ContinuousClock.Instant? {
        self.entries.first?.writtenAt.map { $0 + self.quietWindow }
    }

    /// Records a notification handed to the connection; returns the identifier to write it with. The window must
    /// not be full. It cannot be confirmed before ``written(through:at:)`` says its bytes were written.
    package mutating func write(_ item: Item, resendsWithoutError: Int = 0) -> UInt32 {
        precondition(!self.isFull, "write only when the window has room")
        let identifier = self.nextIdentifier
        self.nextIdentifier &+= 1
        self.entries.append(
            Entry(identifier: identifier, writtenAt: nil, item: item, resendsWithoutError: resendsWithoutError))
        return identifier
    }

    /// The connection wrote the bytes of every notification up to `identifier` (writes complete in order): their
    /// quiet window starts at `now`.
    package mutating func written(through identifier: UInt32, at now: ContinuousClock.Instant) {
        guard let first = self.entries.first?.identifier else { return }
        let through = Int(identifier &- first)
        // An identifier before the window (already settled) or after it (never handed over) marks nothing more.
        guard through < self.entries.count else { return }
        var index = through
        while index >= 0, self.entries[index].writtenAt == nil {
            self.entries[index].writtenAt = now
            index -= 1
        }
    }

    /// Takes the notifications written at least `quietWindow` before `now`: delivered.
    package mutating func confirmDue(now: ContinuousClock.Instant) -> [Item] {
        var delivered: [Item] = []
        while let writtenAt = self.entries.first?.writtenAt, writtenAt + self.quietWindow <= now {
            delivered.append(self.entries.removeFirst().item)
        }
        return delivered
    }

    /// Settles everything on an error packet (the gateway closes the connection after it): the named
    /// notification gets the status's verdict, those before it are delivered, those after it are sent again.
    /// A packet naming a notification already confirmed (or never written) pins nothing: everything unconfirmed
    /// is in doubt as after a close without a packet, so a gateway that keeps naming unknown identifiers cannot
    /// make the client resend forever.
    package mutating func errorReceived(_ response: BinaryErrorResponse) -> Settlement {
        let offset = Int(response.identifier &- (self.entries.first?.identifier ?? self.nextIdentifier))
        guard !self.entries.isEmpty, offset < self.entries.count else {
            return self.closedWithoutError()
        }
        let named = offset
        var settlement = Settlement()
        for (index, entry) in self.entries.enumerated() {
            guard index <= named else {
                settlement.resend.append(Resend(item: entry.item, resendsWithoutError: entry.resendsWithoutError))
                continue
            }
            if index < named {
                settlement.delivered.append(entry.item)
            } else if case .notFailed = response.status.verdict {
                settlement.delivered.append(entry.item)
            } else {
                settlement.failed = (entry.item, response.status.verdict)
            }
        }
        self.entries.removeAll()
        return settlement
    }

    /// Settles everything when the connection closed (or failed) without an error packet: nothing can be
    /// confirmed any more, so everything unconfirmed is sent again, or lost once in doubt too often.
    package mutating func closedWithoutError() -> Settlement {
        var settlement = Settlement()
        for entry in self.entries {
            let resends = entry.resendsWithoutError + 1
            if resends > self.maxResendsWithoutError {
                settlement.lost.append(entry.item)
            } else {
                settlement.resend.append(Resend(item: entry.item, resendsWithoutError: resends))
            }
        }
        self.entries.removeAll()
        return settlement
    }
}
