#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to the process's standard streams, for command output.
enum FileHandleOutput {
    /// Writes `text` to standard error.
    static func standardError(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            _ = write(2, bytes.baseAddress, bytes.count)
        }
    }
}
