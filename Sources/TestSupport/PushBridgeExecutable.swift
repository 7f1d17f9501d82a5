import Foundation

/// Runs the built `pushbridge` executable as a child process, the way a user does.
package enum PushBridgeExecutable {
    /// What a run printed and how it ended.
    package struct Result: Sendable {
        /// The exit status.
        package var status: Int32
        /// Everything written to standard output.
        package var standardOutput: String
        /// Everything written to standard error.
        package var standardError: String
    }

    /// The child did not exit within the timeout (it was terminated).
    package struct TimedOut: Error {}

    /// `pushbridge` is not built next to the tests.
    package struct NotBuilt: Error {}

    /// The executable next to the test bundle (`swift build --build-tests` builds both into one directory).
    package static var url: URL? {
        let candidates = [
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent(),
            Bundle.main.bundleURL.deletingLastPathComponent(),
            Bundle.main.bundleURL,
            RepositoryPaths.root.appendingPathComponent(".build/debug"),
        ]
        return candidates.map { $0.appendingPathComponent("pushbridge") }.first {
            FileManager.default.isExecutableFile(atPath: $0.path)
        }
    }

    /// Runs `pushbridge arguments` in the repository root with `environment` (plus `PATH`), `input` on standard
    /// input; fails after `timeout`.
    ///
    /// With `asUser`, a test running as root runs the executable as that user ID instead (through util-linux's
    /// `setpriv`, with no supplementary groups), as the container image does.
    package static func run(
        _ arguments: [String], environment: [String: String] = [:], input: String = "",
        timeout: Duration = .seconds(30), asUser userID: UInt32? = nil
    ) async throws -> Result {
        guard var executable = self.url else { throw NotBuilt() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pushbridge-run-\(UUID())")
        try FileManager.default.createDirectory(
            at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: scratch) }
        var arguments = arguments
        if let userID {
            // A copy the user can reach: the checkout may sit below a directory only root may enter.
            let copy = scratch.appendingPathComponent("pushbridge")
            try FileManager.default.copyItem(at: executable, to: copy)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
            arguments = ["--reuid=\(userID)", "--regid=\(userID)", "--clear-groups", copy.path] + arguments
            executable = URL(fileURLWithPath: "/usr/bin/setpriv")
        }
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        let inputURL = scratch.appendingPathComponent("stdin")
        try Data(input.utf8).write(to: inputURL)
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)

        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = RepositoryPaths.root
        var base = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        base.merge(environment) { $1 }
        process.environment = base
        process.standardInput = try FileHandle(forReadingFrom: inputURL)
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        let (exited, continuation) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { process in
            continuation.yield(process.terminationStatus)
            continuation.finish()
        }
        try process.run()
        let status = try await withThrowingTaskGroup(of: Int32.self) { group in
            group.addTask {
                for await status in exited {
                    return status
                }
                return -1
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimedOut()
            }
            defer { group.cancelAll() }
            do {
                return try await group.next()!
            } catch {
                process.terminate()
                throw error
            }
        }
        return Result(
            status: status,
            standardOutput: String(decoding: try Data(contentsOf: outputURL), as: UTF8.self),
            standardError: String(decoding: try Data(contentsOf: errorURL), as: UTF8.self)
        )
    }
}
