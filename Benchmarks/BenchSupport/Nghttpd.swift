// nghttpd, nghttp2's own HTTP/2 server (C), as the fast reference server of the benchmarks (`make bench`,
// `make bench-apns`): it answers from its document root at once and spends a few µs of CPU per request, so a
// benchmark against it measures the client rather than the server.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `nghttpd` in a child process on 127.0.0.1, serving one document root over TLS.
///
/// nghttpd answers a request from its document root whatever the method: 200 with the file's bytes when
/// `<root><path>` is a file, 404 with an HTML page otherwise. It ignores request bodies and checks no header, so an
/// APNs-shaped `POST /3/device/<token>` gets 200 with an empty body when the root holds an empty file at that path
/// (``createEmptyFile(at:)``). It keeps up to 2048 open files cached, so up to that many distinct paths cost no
/// file system call per request.
package struct NghttpdServer: Sendable {
    /// The child process.
    package let process: ChildProcess
    /// The port it listens on, on 127.0.0.1.
    package let port: Int
    /// What it was started with, for the report.
    package let commandLine: String

    /// The process id.
    package var pid: pid_t { self.process.pid }

    /// Starts nghttpd with `-a 127.0.0.1 -d documentRoot -m maxConcurrentStreams` (one worker thread, its
    /// default), its output to `logFile`, and returns once it accepts TCP connections. `connectionWindowBits` sets
    /// the connection's receive window to 2^N−1 bytes (`-W`; nghttp2's default is 64 KiB, which at a 100 ms round
    /// trip lets only ~640 KB of request bodies a second through a connection, about 2 000 APNs requests).
    ///
    /// - Parameter requestedPort: the port, or `nil` for a free one (nghttpd cannot report a port the kernel
    ///   chose, so a free one is found first; several developers' benchmarks share the build machine, so a fixed
    ///   port may be taken).
    package static func start(
        documentRoot: String, certificatePath: String, privateKeyPath: String, logFile: String,
        maxConcurrentStreams: Int = 100, connectionWindowBits: Int? = nil, port requestedPort: Int? = nil
    ) async throws(BenchSupportError) -> NghttpdServer {
        let port: Int
        if let requestedPort { port = requestedPort } else { port = try Self.freePort() }
        let arguments =
            ["nghttpd", "-a", "127.0.0.1", "-d", documentRoot, "-m", "\(maxConcurrentStreams)"]
            + (connectionWindowBits.map { ["-W", "\($0)"] } ?? []) + ["\(port)", privateKeyPath, certificatePath]
        let process = try ChildProcess.spawn(try Self.executable(), Array(arguments.dropFirst()), logFile: logFile)
        let server = NghttpdServer(process: process, port: port, commandLine: arguments.joined(separator: " "))
        // Up to 5 s for nghttpd to load its key and listen.
        for _ in 0..<100 {
            if let status = process.exitStatusIfExited() {
                throw BenchSupportError("nghttpd exited at start with status \(status) (port \(port)); see \(logFile)")
            }
            if Self.accepts(port: port) { return server }
            try? await Task.sleep(for: .milliseconds(50))
        }
        server.stop()
        throw BenchSupportError("nghttpd did not listen on 127.0.0.1:\(port) within 5 s; see \(logFile)")
    }

    /// CPU seconds (user + system) nghttpd used so far.
    package var cpuSeconds: Double { self.process.cpuSecondsSoFar() }

    /// Stops nghttpd: SIGTERM, then SIGKILL if it is still there after 2 s; reaps it. Does nothing once it was
    /// reaped (a second call).
    package func stop() {
        // waitpid answers 0 while the child runs, its pid once it exited (reaping it), -1 when it is reaped already.
        guard waitpid(self.pid, nil, WNOHANG) == 0 else { return }
        self.process.signal(SIGTERM)
        for _ in 0..<200 {
            if waitpid(self.pid, nil, WNOHANG) != 0 { return }
            usleep(10_000)
        }
        self.process.signal(SIGKILL)
        _ = waitpid(self.pid, nil, 0)
    }

    /// Creates `directory` (and its parents) and an empty file named by each of `names` in it, keeping files that
    /// exist: paths nghttpd then answers with 200.
    package static func createEmptyFiles(in directory: String, names: [String]) throws(BenchSupportError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw BenchSupportError("cannot create \(directory): \(error)")
        }
        for name in names {
            let path = directory + "/" + name
            let descriptor = open(path, O_WRONLY | O_CREAT, 0o644)
            guard descriptor >= 0 else {
                throw BenchSupportError("cannot create \(path): \(String(cString: strerror(errno)))")
            }
            close(descriptor)
        }
    }

    /// nghttpd's path: the first on `PATH`, else `/usr/sbin/nghttpd`, where Debian's nghttp2-server installs it and
    /// which is not on a user's `PATH` (only root's).
    static func executable() throws(BenchSupportError) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/nghttpd" } + ["/usr/sbin/nghttpd"]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BenchSupportError("nghttpd not found on PATH nor in /usr/sbin: install nghttp2-server (make deps)")
        }
        return found
    }

    /// A port on 127.0.0.1 that nothing listens on now: bound with port 0, read back, released.
    static func freePort() throws(BenchSupportError) -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BenchSupportError("socket() failed: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw BenchSupportError("cannot bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = Self.loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// Why a benchmark helper failed.
package struct BenchSupportError: Error, CustomStringConvertible {
    /// What went wrong.
    package var description: String

    /// An error with its text.
    package init(_ description: String) {
        self.description = description
    }
}
