#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Unbuffered writes to the process's standard streams, for command output.
enum FileHandleOutput {
    /// Writes `text` to standard output, unbuffered (so progress lines appear at once).
    static func standardOutput(_ text: String) {
        self.write(text, to: 1)
    }

    /// Writes `text` to standard error.
    static func standardError(_ text: String) {
        self.write(text, to: 2)
    }

    private static func write(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { bytes in
            _ = Glibc.write(descriptor, bytes.baseAddress, bytes.count)
        }
    }
}
