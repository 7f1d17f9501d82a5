extension String {
    /// Calls `body` with the string's UTF-8 bytes where they are. `withUTF8` needs a `var` copy of the string,
    /// which costs a retain and a release; native and small strings are contiguous, so the copy is made only for
    /// the rare one that is not.
    @inlinable
    public func withUTF8InPlace<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try self.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
