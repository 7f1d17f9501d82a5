import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time of processes, for the benchmarks' "CPU per request" figures.
public enum ProcessCPU {
    /// CPU seconds (user + system) process `pid` used so far, from `/proc/PID/stat`; 0 when it is gone.
    public static func seconds(pid: pid_t) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU seconds (user + system) of this process (`RUSAGE_SELF`) or of its children that were waited for
    /// (`RUSAGE_CHILDREN`), from `getrusage`.
    public static func seconds(_ who: __rusage_who_t) -> Double {
        var usage = rusage()
        getrusage(who, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// `RUSAGE_SELF`.
    public static let ownProcess = __rusage_who_t(RUSAGE_SELF.rawValue)
    /// `RUSAGE_CHILDREN`.
    public static let waitedChildren = __rusage_who_t(RUSAGE_CHILDREN.rawValue)
}
