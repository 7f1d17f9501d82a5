/// Where ``JSONText`` writes: a byte array, or a ``ByteBuilder``.
public protocol ByteOutput {
    /// Appends one byte.
    mutating func append(_ byte: UInt8)
    /// Appends `bytes`.
    mutating func append(utf8 bytes: UnsafeBufferPointer<UInt8>)
}

extension ByteOutput {
    /// Appends the bytes of a constant.
    @inlinable
    public mutating func append(ascii text: StaticString) {
        text.withUTF8Buffer { self.append(utf8: $0) }
    }
}

extension Array: ByteOutput where Element == UInt8 {
    @inlinable
    public mutating func append(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        self.append(contentsOf: bytes)
    }
}

/// A growing byte buffer for text written a few bytes at a time (the records' JSON): an append is a bounds check and
/// a store. An array checks that its storage is not shared and calls the runtime to do so on every append, and copies
/// even a two-byte run through `memmove`; a record is written in about a hundred appends, once per notification.
///
/// It does not own its memory: its owner (a non-copyable ``JSONWriter``) calls ``deallocate()`` once, and never
/// copies it. (A non-copyable buffer would free itself, but generic code over non-copyable types was not specialised
/// across modules, and every append then went through a witness table.) `public` and `@inlinable` for the same
/// reason as ``JSONText``: an append must be inlined where it is called.
public struct ByteBuilder: ByteOutput {
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    /// The bytes written so far.
    @usableFromInline var written = 0

    /// The bytes written so far.
    @inlinable
    public var count: Int { self.written }

    /// An empty buffer with room for `capacity` bytes before it grows.
    @inlinable
    public init(capacity: Int) {
        self.capacity = Swift.max(16, capacity)
        self.base = .allocate(capacity: self.capacity)
    }

    /// Frees the memory; the builder must not be used afterwards.
    @inlinable
    public func deallocate() {
        self.base.deallocate()
    }

    @inlinable
    public mutating func append(_ byte: UInt8) {
        if self.written == self.capacity { self.grow(toAtLeast: self.written + 1) }
        self.base[self.written] = byte
        self.written += 1
    }

    @inlinable
    public mutating func append(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        let count = bytes.count
        if self.capacity - self.written < count { self.grow(toAtLeast: self.written + count) }
        Self.copy(UnsafeRawPointer(source), to: UnsafeMutableRawPointer(self.base + self.written), count: count)
        self.written += count
    }

    /// Copies `count` (at least 1) bytes. Short runs (names, digits, punctuation) are copied as
    /// two words that may overlap, which is a few instructions: a byte loop stored and reloaded the count on every
    /// byte, and `memmove`'s call costs more than such a copy.
    @inlinable
    static func copy(_ source: UnsafeRawPointer, to target: UnsafeMutableRawPointer, count: Int) {
        switch count {
        case 8...16:
            let head = source.loadUnaligned(as: UInt64.self)
            let tail = source.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            target.storeBytes(of: head, as: UInt64.self)
            target.storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
        case 4..<8:
            let head = source.loadUnaligned(as: UInt32.self)
            let tail = source.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
            target.storeBytes(of: head, as: UInt32.self)
            target.storeBytes(of: tail, toByteOffset: count - 4, as: UInt32.self)
        case 1..<4:
            // First, middle and last byte: all of 1, 2 or 3.
            let first = source.load(as: UInt8.self)
            let middle = source.load(fromByteOffset: count / 2, as: UInt8.self)
            let last = source.load(fromByteOffset: count - 1, as: UInt8.self)
            target.storeBytes(of: first, as: UInt8.self)
            target.storeBytes(of: middle, toByteOffset: count / 2, as: UInt8.self)
            target.storeBytes(of: last, toByteOffset: count - 1, as: UInt8.self)
        default:
            target.copyMemory(from: source, byteCount: count)
        }
    }

    /// Appends `bytes`.
    @inlinable
    public mutating func append(contentsOf bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { self.append(utf8: $0) }
    }

    /// The bytes written, as an array.
    @inlinable
    public var bytes: [UInt8] {
        Array(UnsafeBufferPointer(start: self.base, count: self.written))
    }

    @usableFromInline
    mutating func grow(toAtLeast needed: Int) {
        var capacity = self.capacity
        while capacity < needed { capacity = capacity.multipliedReportingOverflow(by: 2).partialValue }
        precondition(capacity >= needed, "ByteBuilder cannot hold \(needed) bytes")
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        larger.update(from: self.base, count: self.written)
        self.base.deallocate()
        self.base = larger
        self.capacity = capacity
    }
}
