import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A test broker run as a child process that prints one JSON object of addresses on its first line once it is
/// ready, takes commands on its standard input, and exits when that input closes (so it never outlives the test
/// process): Tansu's script (``TansuBroker``) and the soak's kfake.
package final class BrokerProcess: Sendable {
    /// The first line's fields.
    package let addresses: [String: String]
    private let process: Process
    private let input: Pipe
    private let outputURL: URL
    private let errorURL: URL

    /// The process did not print its addresses in time (its standard error says why).
    package struct StartFailed: Error, CustomStringConvertible {
        package var description: String
    }

    private init(addresses: [String: String], process: Process, input: Pipe, outputURL: URL, errorURL: URL) {
        self.addresses = addresses
        self.process = process
        self.input = input
        self.outputURL = outputURL
        self.errorURL = errorURL
    }

    /// Starts `executable arguments` (its output into a scratch directory named after `name`) and waits at most
    /// `timeout` for its first line.
    package static func start(
        _ name: String, executable: URL, arguments: [String], timeout: Duration
    ) async throws -> BrokerProcess {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = Self.lines(of: outputURL).first {
                let addresses = try JSONDecoder().decode([String: String].self, from: Data(line.utf8))
                return BrokerProcess(
                    addresses: addresses, process: process, input: input, outputURL: outputURL, errorURL: errorURL)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        let reason = String(decoding: (try? Data(contentsOf: errorURL)) ?? Data(), as: UTF8.self)
        throw StartFailed(description: "\(name) did not start within \(timeout): \(reason)")
    }

    /// The complete lines of `url`.
    private static func lines(of url: URL) -> [String] {
        let text = String(decoding: (try? Data(contentsOf: url)) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
            .map(String.init)
    }

    /// The complete lines the process has printed so far, its addresses first.
    package var lines: [String] { Self.lines(of: self.outputURL) }

    /// Writes `command` and a newline to its standard input.
    package func send(_ command: String) throws {
        try self.input.fileHandleForWriting.write(contentsOf: Data("\(command)\n".utf8))
    }

    /// Every broker unreachable for `duration`, without a restart (the brokers keep their data and groups): the
    /// `drop SECONDS` command both lanes' processes take. Returns at once.
    package func dropConnections(for duration: Duration) throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        try self.send("drop \(seconds)")
    }

    /// Closes its standard input and sends SIGTERM (it exits on either); SIGKILL after 10 s.
    package func stop() async {
        try? self.input.fileHandleForWriting.close()
        self.process.terminate()
        let deadline = ContinuousClock.now + .seconds(10)
        while self.process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }
}
