/// One entry of the feedback service: a device token the service found no longer valid, and since when.
/// On the wire: `time (4, UNIX seconds) | token length (2) | token`, all big-endian.
package struct FeedbackTuple: Sendable, Hashable {
    /// When the service determined the app was gone from the device, in UNIX seconds.
    package var timeEpochSeconds: UInt32
    /// The device token's bytes.
    package var token: [UInt8]

    /// Creates a tuple.
    package init(timeEpochSeconds: UInt32, token: [UInt8]) {
        self.timeEpochSeconds = timeEpochSeconds
        self.token = token
    }

    /// The device token as lowercase hex, as records carry it.
    package var deviceToken: String { BinaryFrame.hex(self.token) }

    /// The tuple's bytes.
    package var bytes: [UInt8] {
        var bytes: [UInt8] = []
        BinaryFrame.append(self.timeEpochSeconds, to: &bytes)
        BinaryFrame.append(UInt16(self.token.count), to: &bytes)
        bytes.append(contentsOf: self.token)
        return bytes
    }
}

/// Reads feedback tuples from a byte stream that arrives in pieces of any size. Holds at most one tuple's
/// bytes between pieces; a token longer than ``maxTokenBytes`` (Apple documents 32, and at most 100 for the
/// token item) means the server is not speaking the protocol, and reading stops with an error.
package struct FeedbackReader: Sendable {
    /// The longest token accepted.
    package static let maxTokenBytes = 100

    /// Why reading stopped.
    package struct MalformedFeedback: Error, Sendable, Hashable, CustomStringConvertible {
        /// What arrived.
        package var detail: String
        /// The tuples completed in the same piece before the fault: they arrived whole and are valid.
        package var tuplesBefore: [FeedbackTuple] = []
        package var description: String { self.detail }
    }

    private var pending: [UInt8] = []

    /// Creates a reader with nothing read yet.
    package init() {}

    /// Whether a partial tuple is waiting for more bytes (at the end of the stream: a truncated tuple).
    package var hasPartialTuple: Bool { !self.pending.isEmpty }

    /// Reads `bytes` on from where the last piece ended; returns the tuples completed. On a fault, the error
    /// carries the tuples this piece completed before it.
    package mutating func read(_ bytes: some Collection<UInt8>) throws(MalformedFeedback) -> [FeedbackTuple] {
        self.pending.append(contentsOf: bytes)
        var tuples: [FeedbackTuple] = []
        var start = 0
        while self.pending.count - start >= 6 {
            let length = Int(self.pending[start + 4]) << 8 | Int(self.pending[start + 5])
            guard length > 0, length <= Self.maxTokenBytes else {
                self.pending.removeAll()
                throw MalformedFeedback(
                    detail: "a feedback tuple announces a \(length)-byte token (1 to \(Self.maxTokenBytes) expected)",
                    tuplesBefore: tuples)
            }
            guard self.pending.count - start >= 6 + length else { break }
            let time = self.pending[start..<start + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            tuples.append(
                FeedbackTuple(timeEpochSeconds: time, token: Array(self.pending[start + 6..<start + 6 + length])))
            start += 6 + length
        }
        self.pending.removeFirst(start)
        return tuples
    }
}
