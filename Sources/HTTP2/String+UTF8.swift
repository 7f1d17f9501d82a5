extension String {
    /// Calls `body` with the string's UTF-8 bytes where they are, without the `var` copy `withUTF8` needs (a
    /// retain and a release per call; header values are written once per request).
    func withHeaderBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = self.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return copy.withUTF8(body)
    }
}
