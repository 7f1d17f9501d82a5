import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process that announces where it listens on its standard output (`pushbridge simulator` prints
/// "APNs simulator listening on 127.0.0.1:PORT …" and, with `--binary-port`, "binary gateway listening on …").
package struct AnnouncingProcess {
    /// The process, for its pid and to stop it.
    package let process: Process
    /// The port of each announced prefix, in the order asked for.
    package let ports: [Int]

    /// Starts `executable` with `arguments` and reads its output until a line starting with each of `prefixes`
    /// gave a `host:PORT` after the prefix. Standard error goes to this process's.
    package static func start(_ executable: String, _ arguments: [String], announcing prefixes: [String])
        throws(BenchSupportError) -> AnnouncingProcess
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        do {
            try process.run()
        } catch {
            throw BenchSupportError("cannot start \(executable): \(error)")
        }
        var text = ""
        while true {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
            let lines = text.split(separator: "\n")
            let ports = prefixes.compactMap { prefix in
                lines.first { $0.hasPrefix(prefix) }.flatMap { line in
                    line.dropFirst(prefix.count).prefix { $0 != " " }.split(separator: ":").last.flatMap { Int($0) }
                }
            }
            if ports.count == prefixes.count {
                return AnnouncingProcess(process: process, ports: ports)
            }
        }
        process.terminate()
        throw BenchSupportError("\(executable) did not print \(prefixes.joined(separator: ", ")); it printed: \(text)")
    }

    /// The process id.
    package var pid: pid_t { self.process.processIdentifier }

    /// Sends SIGTERM and waits up to `timeout` for the process to end, then sends SIGKILL and waits for that: a
    /// child that missed or ignored the SIGTERM must not outlive the benchmark or keep a test run waiting.
    package func stop(timeout: Duration = .seconds(5)) {
        guard self.process.isRunning else { return }
        self.process.terminate()
        let deadline = ContinuousClock.now + timeout
        while self.process.isRunning, ContinuousClock.now < deadline {
            usleep(10_000)
        }
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }
    }
}
