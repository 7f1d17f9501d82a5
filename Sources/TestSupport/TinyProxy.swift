import Foundation
import NIOCore
import NIOPosix

/// Debian's `tinyproxy` (an HTTP proxy that tunnels with `CONNECT`), started by a test on 127.0.0.1 with a
/// configuration of its own in a temporary directory: the real proxy the egress proxy tests go through
/// (`scripts/install-deps.sh` installs it; docs/testing.md).
///
/// It allows only 127.0.0.1, tunnels only to `connectPorts`, and asks for `credentials` when given (`BasicAuth`:
/// 407 without them or with wrong ones). `idleTimeout` is its `Timeout`: a tunnel without traffic for that long is
/// closed, which is how a test makes the proxy drop a tunnel.
package final class TinyProxy: Sendable {
    /// The port it listens on (127.0.0.1).
    package let port: Int
    /// Its configuration and log.
    package let directory: URL
    private let process: Process

    /// `tinyproxy` could not be found: the tests that need it say so and skip (CI installs it).
    package static var binary: String? {
        ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether the tests that need tinyproxy run: when it is installed, and always on CI (`CI` set), where `make deps`
    /// installed it and a missing one must fail them rather than skip them.
    package static var testsRun: Bool {
        Self.binary != nil || ProcessInfo.processInfo.environment["CI"] != nil
    }

    /// The message of a test skipped because tinyproxy is missing.
    package static let missing = "tinyproxy is not installed (make deps installs it: apt-get install tinyproxy)"

    private init(port: Int, directory: URL, process: Process) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// `http://[user:password@]127.0.0.1:port`.
    package func url(user: String? = nil, password: String? = nil) -> String {
        let credentials = user.map { "\($0):\(password ?? "")@" } ?? ""
        return "http://\(credentials)127.0.0.1:\(self.port)"
    }

    /// Starts tinyproxy on `port` (0: a free one) and returns once it accepts connections (at most 20 s).
    package static func start(
        connectPorts: [Int], credentials: (user: String, password: String)? = nil,
        idleTimeout: Duration = .seconds(600),
        port: Int = 0
    ) async throws -> TinyProxy {
        guard let binary = Self.binary else { throw StartFailed(message: Self.missing) }
        let port = port == 0 ? try await Self.freePort() : port
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushbridge-tinyproxy-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var lines = [
            "Port \(port)", "Listen 127.0.0.1", "Timeout \(max(1, idleTimeout.components.seconds))", "MaxClients 100",
            "Allow 127.0.0.1", "LogLevel Info", "DisableViaHeader Yes",
            "LogFile \"\(directory.appendingPathComponent("tinyproxy.log").path)\"",
        ]
        lines += connectPorts.map { "ConnectPort \($0)" }
        if let credentials { lines.append("BasicAuth \(credentials.user) \(credentials.password)") }
        let configuration = directory.appendingPathComponent("tinyproxy.conf")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: configuration)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-d", "-c", configuration.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let proxy = TinyProxy(port: port, directory: directory, process: process)
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port).get()
            {
                try? await channel.close()
                return proxy
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let log = proxy.log
        proxy.stop()
        throw StartFailed(message: "tinyproxy did not start on 127.0.0.1:\(port): \(log.suffix(2000))")
    }

    /// Its log so far.
    package var log: String {
        (try? String(contentsOf: self.directory.appendingPathComponent("tinyproxy.log"), encoding: .utf8)) ?? ""
    }

    /// Kills it (SIGKILL: every tunnel it carries closes at once) and waits until it is gone; the directory is
    /// removed.
    package func stop() {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: self.directory)
    }

    /// tinyproxy did not start.
    package struct StartFailed: Error, CustomStringConvertible {
        /// Why.
        package var message: String
        package var description: String { self.message }
    }

    /// A port nothing listens on now (bound and released by the kernel's choice).
    private static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }
}
