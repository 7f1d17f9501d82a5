import Foundation

/// h2load, nghttp2's load client (C): the reference client of the benchmarks. One run sends `requests` requests
/// over ONE connection (`-c 1`) with `streams` concurrent streams (`-m`), the same body and headers each time.
package enum H2Load {
    /// What one run measured.
    package struct Result: Sendable {
        /// Requests per second, from h2load's `finished in …, N req/s` line.
        package var rate: Double
        /// Responses with a 2xx status.
        package var succeeded: Int
        /// h2load's own CPU seconds (user + system), from `getrusage(RUSAGE_CHILDREN)` around the run.
        package var cpuSeconds: Double
        /// h2load's CPU per request, in µs.
        package var cpuMicrosecondsPerRequest: Double
    }

    /// Where the requests go.
    package enum Target: Sendable {
        /// Every request to one URL.
        case url(String)
        /// The URLs listed in a file, one a line, in turn (`-i FILE`); they must share scheme, host and port.
        case urlList(file: String)
    }

    /// Runs h2load to completion. `redacting` is replaced by `<redacted>` in the printed command line (a bearer
    /// token). Throws when h2load fails or prints no summary.
    package static func run(
        requests: Int, streams: Int = 100, bodyFile: String, headers: [(name: String, value: String)],
        target: Target, printCommand: Bool = false, redacting secret: String? = nil
    ) throws(BenchSupportError) -> Result {
        var arguments = ["-n", "\(requests)", "-c", "1", "-m", "\(streams)", "-d", bodyFile]
        for header in headers { arguments += ["-H", "\(header.name): \(header.value)"] }
        let url: String
        switch target {
        case .url(let single):
            url = single
            arguments.append(single)
        case .urlList(let file):
            url = file
            arguments += ["-i", file]
        }
        if printCommand {
            var line = "h2load " + arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")
            if let secret, !secret.isEmpty { line = line.replacingOccurrences(of: secret, with: "<redacted>") }
            print("  \(line)")
        }
        let before = ProcessCPU.seconds(ProcessCPU.waitedChildren)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["h2load"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let data: Data
        do {
            try process.run()
            data = try output.fileHandleForReading.readToEnd() ?? Data()
        } catch {
            throw BenchSupportError("cannot run h2load (apt-get install nghttp2-client): \(error)")
        }
        process.waitUntilExit()
        let cpu = ProcessCPU.seconds(ProcessCPU.waitedChildren) - before
        let text = String(decoding: data, as: UTF8.self)
        // "finished in 2.34s, 85470.09 req/s, 10.2MB/s" and "status codes: 200000 2xx, 0 3xx, ..."
        guard let finished = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let rate = finished.split(separator: ",").dropFirst().first
                .flatMap({ Double($0.trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) }),
            let statuses = text.split(separator: "\n").first(where: { $0.hasPrefix("status codes:") }),
            let succeeded = Int(statuses.dropFirst("status codes: ".count).split(separator: " ")[0])
        else { throw BenchSupportError("unexpected h2load output against \(url):\n\(text)") }
        return Result(
            rate: rate, succeeded: succeeded, cpuSeconds: cpu,
            cpuMicrosecondsPerRequest: cpu / Double(max(requests, 1)) * 1e6)
    }
}
