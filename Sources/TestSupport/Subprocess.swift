import Foundation

/// Runs a helper process (Python, `openssl`) to its end on a thread of its own.
///
/// Waiting for a child on the calling thread (`waitUntilExit`, `readDataToEndOfFile`) blocks one of Swift's
/// cooperative threads, of which there are as many as cores: two such waits at once stopped every other test of the
/// parallel suite for seconds on a 2-core host, long enough for their own deadlines to pass.
package enum Subprocess {
    package struct Result: Sendable {
        /// The exit status.
        package var status: Int32
        /// Everything the process wrote to standard output.
        package var output: Data
    }

    /// Runs `executable arguments` (standard error discarded), writes `input` to its standard input and closes it,
    /// reads its standard output to the end, and waits for it to exit.
    package static func run(_ executable: URL, _ arguments: [String], input: Data? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
            Thread {
                continuation.resume(with: Swift.Result { try self.runHere(executable, arguments, input: input) })
            }.start()
        }
    }

    private static func runHere(_ executable: URL, _ arguments: [String], input: Data?) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let stdin = input.map { _ in Pipe() }
        process.standardInput = stdin ?? FileHandle.nullDevice
        try process.run()
        if let stdin, let input {
            stdin.fileHandleForWriting.write(input)
            try stdin.fileHandleForWriting.close()
        }
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, output: printed)
    }
}
