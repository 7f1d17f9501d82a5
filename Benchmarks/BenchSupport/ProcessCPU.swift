import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time of processes, for the benchmarks' "CPU per request" figures.
package enum ProcessCPU {
    /// CPU seconds (user + system) process `pid` used so far, from `/proc/PID/stat`; 0 when it is gone.
    package static func seconds(pid: pid_t) -> Double {
        Self.seconds(statFile: "/proc/\(pid)/stat")
    }

    /// One thread's CPU time and context switches so far.
    package struct ThreadUsage: Sendable {
        /// The thread's name (`/proc/PID/task/TID/comm`: at most 15 bytes, so Swift's concurrency threads show
        /// as `oot.default-qos`).
        package var name: String
        /// CPU seconds, user + system.
        package var seconds: Double
        /// Times it gave up the CPU to wait (`voluntary_ctxt_switches`).
        package var voluntarySwitches: Int
        /// Times it was preempted (`nonvoluntary_ctxt_switches`).
        package var involuntarySwitches: Int
    }

    /// Every thread of process `pid` by thread ID, from `/proc/PID/task/*`; empty when the process is gone.
    package static func threads(pid: pid_t) -> [Int: ThreadUsage] {
        let directory = "/proc/\(pid)/task"
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [:] }
        var result: [Int: ThreadUsage] = [:]
        for task in tasks {
            guard let tid = Int(task),
                let name = try? String(contentsOfFile: "\(directory)/\(task)/comm", encoding: .utf8),
                let status = try? String(contentsOfFile: "\(directory)/\(task)/status", encoding: .utf8)
            else { continue }
            func field(_ key: String) -> Int {
                let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") }
                return line.flatMap { Int($0.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces)) } ?? 0
            }
            result[tid] = ThreadUsage(
                name: name.trimmingCharacters(in: .whitespacesAndNewlines),
                seconds: Self.seconds(statFile: "\(directory)/\(task)/stat"),
                voluntarySwitches: field("voluntary_ctxt_switches"),
                involuntarySwitches: field("nonvoluntary_ctxt_switches"))
        }
        return result
    }

    /// CPU seconds (user + system) from a `stat` file of `/proc` (a process's or a thread's); 0 when unreadable.
    static func seconds(statFile path: String) -> Double {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU seconds (user + system) of this process (`RUSAGE_SELF`) or of its children that were waited for
    /// (`RUSAGE_CHILDREN`), from `getrusage`.
    package static func seconds(_ who: __rusage_who_t) -> Double {
        var usage = rusage()
        getrusage(who, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// `RUSAGE_SELF`.
    package static let ownProcess = __rusage_who_t(RUSAGE_SELF.rawValue)
    /// `RUSAGE_CHILDREN`.
    package static let waitedChildren = __rusage_who_t(RUSAGE_CHILDREN.rawValue)
}
