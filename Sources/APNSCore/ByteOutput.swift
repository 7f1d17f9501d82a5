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
        if self.capacity - self.written < bytes.count { self.grow(toAtLeast: self.written + bytes.count) }
        if bytes.count <= 16 {
            // Short runs (names, digits, punctuation) byte by byte: `memmove`'s call costs more than the copy.
            for index in 0..<bytes.count { self.base[self.written + index] = source[index] }
        } else {
            (self.base + self.written).update(from: source, count: bytes.count)
        }
        self.written += bytes.count
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
