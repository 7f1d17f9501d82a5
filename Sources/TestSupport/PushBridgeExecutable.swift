import Foundation
import Synchronization
import TestWaiting
import Testing
import Waiting

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

extension PushBridgeExecutable {
    /// Starts `pushbridge arguments` in the repository root, with this process's environment, and returns at once:
    /// for a command that runs until stopped (`run`, `simulator`). Its standard output goes to `standardOutput`
    /// and its standard error to `standardError` (`nil`: discarded); a ``ProcessOutput`` reads either as it comes.
    package static func start(
        _ arguments: [String], standardOutput: Any? = nil, standardError: Any? = nil
    ) throws -> RunningPushBridge {
        guard let executable = self.url else { throw NotBuilt() }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = RepositoryPaths.root
        process.standardOutput = standardOutput ?? FileHandle.nullDevice
        process.standardError = standardError ?? FileHandle.nullDevice
        let exited = AsyncCondition(false)
        process.terminationHandler = { _ in exited.set() }
        try process.run()
        return RunningPushBridge(process: process, exited: exited, output: nil)
    }

    /// ``start(_:standardOutput:standardError:)`` with both standard output and error going to `output`, which the
    /// returned process offers for waits (``RunningPushBridge/waitForOutput(containing:timeout:)``).
    package static func start(_ arguments: [String], output: ProcessOutput) throws -> RunningPushBridge {
        // Process closes its copy of the pipe's write end once the child has it: the reader sees the end when the
        // child exits.
        let started = try self.start(arguments, standardOutput: output.pipe, standardError: output.pipe)
        return RunningPushBridge(process: started.process, exited: started.exited, output: output)
    }
}

/// A `pushbridge` child process started by ``PushBridgeExecutable/start(_:standardOutput:standardError:)``.
package struct RunningPushBridge: Sendable {
    package let process: Process
    /// Set when the process ended (its termination handler, on Foundation's thread).
    fileprivate let exited: AsyncCondition<Bool>
    /// Its standard output and error, when it was started with a ``ProcessOutput``.
    package let output: ProcessOutput?

    init(process: Process, exited: AsyncCondition<Bool>, output: ProcessOutput?) {
        self.process = process
        self.exited = exited
        self.output = output
    }

    /// Waits until what it printed holds `condition`, at most `timeout`; records an issue naming `what` and throws
    /// otherwise, or when it was started without a ``ProcessOutput``.
    package func waitForOutput(
        _ what: String, timeout: Duration = .seconds(60), until condition: @escaping @Sendable (String) -> Bool
    ) async throws {
        let printed = await self.output?.wait(timeout: timeout, until: condition)
        try requireInTime(printed != nil, "\(what) printed", within: timeout)
    }

    /// Waits until it printed `text`, at most `timeout` (``waitForOutput(_:timeout:until:)``).
    package func waitForOutput(containing text: String, timeout: Duration = .seconds(60)) async throws {
        try await self.waitForOutput("\"\(text)\"", timeout: timeout) { $0.contains(text) }
    }

    package var isRunning: Bool { !self.exited.read { $0 } }

    package func kill(signal: Int32) {
        Foundation.kill(self.process.processIdentifier, signal)
    }

    /// SIGTERM, when it still runs.
    package func terminate() {
        if self.isRunning { self.process.terminate() }
    }

    /// Waits (at most `timeout`) and returns the exit status, or 128 + the signal that ended the process; -1 when
    /// it had to be killed. Waits for the termination handler, so it holds no thread of the test run's small
    /// cooperative pool and polls nothing.
    package func waitForExit(timeout: Duration = .seconds(60)) async -> Int32 {
        guard await self.exited.waitUntilSet(deadline: .now + timeout) else {
            Foundation.kill(self.process.processIdentifier, SIGKILL)
            _ = await self.exited.waitUntilSet(deadline: .now + .seconds(10))
            await self.output?.waitForEnd(timeout: .seconds(10))
            return -1
        }
        // What it printed last is read (and copied) once the pipe ends.
        await self.output?.waitForEnd(timeout: .seconds(10))
        return self.process.terminationReason == .uncaughtSignal
            ? self.process.terminationStatus + 128 : self.process.terminationStatus
    }
}

/// A child process's standard output (or error), collected as it arrives, and copied to a file when one is given, with
/// a bounded wait for what it printed. Waits are woken by what arrives: nothing polls.
package final class ProcessOutput: Sendable {
    package let pipe: Pipe
    /// Everything read so far, and whether the pipe's last writer closed it.
    private let state = AsyncCondition((text: "", ended: false))

    /// Collects the pipe's output; with `file`, appends it there too (before a wait can see it, so a test that waited
    /// for a line finds it in the file). The pipe holds 1 MiB, so a child that logs a burst while the test's threads
    /// are busy does not wait for them.
    package convenience init(copyingTo file: URL? = nil) {
        let pipe = Pipe()
        // F_SETPIPE_SZ (Linux's F_LINUX_SPECIFIC_BASE + 7), which Glibc exposes only with _GNU_SOURCE; the default
        // capacity (64 KiB) is kept when the system refuses.
        _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, 1031, 1 << 20)
        self.init(reading: pipe, copyingTo: file)
    }

    /// Collects what arrives on `pipe` from now on (for a pipe a test filled before the child started).
    ///
    /// A thread of its own reads the pipe until every writer closed it, with plain blocking reads: no dispatch source
    /// (`FileHandle.readabilityHandler`), whose file descriptor could be closed under it when the test ends first, and
    /// no wait on a shared thread pool that a loaded suite keeps busy while the child's writes pile up.
    package init(reading pipe: Pipe, copyingTo file: URL? = nil) {
        self.pipe = pipe
        let copy = file.flatMap { url -> FileHandle? in
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            return try? FileHandle(forWritingTo: url)
        }
        let state = self.state
        let reading = pipe.fileHandleForReading
        let thread = Thread {
            // The handle stays alive (and its descriptor open) until the end is read.
            let descriptor = reading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    let data = Data(buffer[..<count])
                    try? copy?.write(contentsOf: data)
                    state.withLock { $0.text += String(decoding: data, as: UTF8.self) }
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            try? copy?.close()
            state.withLock { $0.ended = true }
            withExtendedLifetime(reading) {}
        }
        thread.name = "process-output"
        thread.start()
    }

    /// Everything printed so far.
    package var printed: String { self.state.read { $0.text } }

    /// The whole output once `condition` holds for it; `nil` after `timeout`.
    package func wait(timeout: Duration = .seconds(20), until condition: @escaping @Sendable (String) -> Bool) async
        -> String?
    {
        await self.state.wait(deadline: .now + timeout) { state in condition(state.text) ? state.text : nil }.value
    }

    /// Waits until every writer closed the pipe (the child exited), at most `timeout`: then all it printed is here, and
    /// in the copy.
    package func waitForEnd(timeout: Duration) async {
        _ = await self.state.wait(deadline: .now + timeout) { $0.ended ? () : nil }
    }

    /// The whole output once it contains `needle`; `nil` after `timeout`.
    package func wait(containing needle: String, timeout: Duration = .seconds(20)) async -> String? {
        await self.wait(timeout: timeout) { $0.contains(needle) }
    }
}
