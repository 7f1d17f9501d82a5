import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, measured alone: CPU time from `/proc` and `wait4`, peak RSS from
/// `/proc/PID/status` (`VmHWM`). Standard output and error go to a file.
package struct ChildProcess: Sendable {
    /// The process id.
    package let pid: pid_t
    /// The executable's file name, for messages.
    package let name: String

    /// CPU time and peak memory of a process.
    package struct Usage: Sendable {
        /// User + system CPU seconds.
        package var cpuSeconds: Double
        /// Peak resident set size, in MiB.
        package var peakRSSMebibytes: Double
    }

    /// Starts `executable` (a path) with `arguments`, its standard output and error appended to `logFile`.
    ///
    /// The child starts with no signal blocked and default signal handlers. Threads of a Swift process (the
    /// cooperative pool, Foundation's) block most signals, and `posix_spawn` otherwise hands the spawning thread's
    /// mask on: nghttpd started that way ignored SIGTERM and SIGINT and outlived the benchmark.
    ///
    /// It also inherits no file descriptor but 0, 1 and 2. Sockets without close-on-exec would otherwise stay open
    /// in the child: a listening socket its owner closed would go on accepting connections, and a test that
    /// connects to a port it just closed got a connection, reset when the child exited.
    package static func spawn(
        _ executable: String, _ arguments: [String], logFile: String
    ) throws(BenchSupportError) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logFile, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        Self.closeInheritedDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard status == 0 else {
            throw BenchSupportError("cannot start \(executable): \(String(cString: strerror(status)))")
        }
        return ChildProcess(pid: pid, name: (executable as NSString).lastPathComponent)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up at run time: Swift's Glibc
    /// module is built without `_GNU_SOURCE`, which its declaration needs.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(
        UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np"
    ).map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Makes the spawn close every descriptor from 3 up; without `addclosefrom_np`, those open now.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        if let addCloseFrom = Self.addCloseFrom, addCloseFrom(&actions, 3) == 0 { return }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap({ Int32($0) }) where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }

    /// The exit status when the process has exited (it is reaped then), `nil` while it runs.
    package func exitStatusIfExited() -> Int32? {
        var status: Int32 = 0
        guard waitpid(self.pid, &status, WNOHANG) == self.pid else { return nil }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// CPU seconds (user + system) used so far, from `/proc/PID/stat`.
    package func cpuSecondsSoFar() -> Double {
        ProcessCPU.seconds(pid: self.pid)
    }

    /// The process's peak resident set size so far (`VmHWM` in `/proc/PID/status`), in MiB; `nil` once it exited.
    ///
    /// Not `wait4`'s `ru_maxrss`: Linux carries that across `execve`, and `posix_spawn` starts the child in the
    /// parent's memory, so it would report the benchmark's own peak (which holds the whole Kafka backlog).
    package func peakRSSMebibytesSoFar() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(self.pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kibibytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return nil }
        return kibibytes / 1024
    }

    /// Sends signal `number` to the process.
    package func signal(_ number: Int32) {
        kill(self.pid, number)
    }

    /// Waits for the process to exit (polling, so no thread blocks), then returns its exit status and usage.
    package func wait(timeout: Duration) async throws(BenchSupportError) -> (exitStatus: Int32, usage: Usage) {
        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        var usage = rusage()
        var peakRSS = self.peakRSSMebibytesSoFar() ?? 0
        while true {
            peakRSS = max(peakRSS, self.peakRSSMebibytesSoFar() ?? 0)
            let result = wait4(self.pid, &status, WNOHANG, &usage)
            if result == self.pid { break }
            if result < 0 {
                throw BenchSupportError("wait4 on \(self.name) failed: \(String(cString: strerror(errno)))")
            }
            if ContinuousClock.now > deadline {
                kill(self.pid, SIGKILL)
                throw BenchSupportError("\(self.name) did not exit within \(timeout)")
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (
            exitStatus,
            Usage(
                cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                peakRSSMebibytes: peakRSS
            )
        )
    }
}
