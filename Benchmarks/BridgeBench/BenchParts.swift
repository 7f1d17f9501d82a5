import APNSCore
import Configuration
import Foundation
import Routing

#if canImport(Glibc)
    import Glibc
#endif

/// The benchmark's events: the SPEC §2 `order-shipped` shape, one distinct device token each.
struct EventFactory: Sendable {
    /// `expires_at`: a day after the run starts, so nothing expires.
    let expiresAtEpochSeconds = Int64(Date().timeIntervalSince1970) + 86_400

    func event(_ index: Int) -> (key: [UInt8], value: [UInt8]) {
        let value =
            #"{"type":"shipped","order":{"id":\#(100_000 + index),"carrier":"Demo Express","eta":"tomorrow"},"#
            + #""customer":{"apns_tokens":["\#(Self.token(index))"],"unread_count":\#(index % 5)},"#
            + #""expires_at":\#(self.expiresAtEpochSeconds)}"#
        // Distinct keys spread the events evenly over the partitions (the mock drops the oldest data of a full one).
        return (Array("customer-\(index)".utf8), Array(value.utf8))
    }

    var sampleByteCount: Int { self.event(0).value.count }

    /// 64 hex digits, distinct per index.
    static func token(_ index: Int) -> String {
        var state = UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        return (0..<4).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return String(format: "%016llx", z ^ (z >> 31))
        }.joined()
    }

    /// The request the bridge sends for event 0, mapped through the benchmark's own configuration file.
    func sampleRequest(configurationPath: String) throws -> APNSCore.Notification {
        let loaded = try ConfigurationLoader().load(file: configurationPath)
        let event = self.event(0)
        let mappings = loaded.router.map(
            event: RoutingEvent(
                topic: BridgeBench.inputTopic, partition: 0, offset: 0, key: event.key, value: event.value)
        )
        guard case .notifications(let notifications)? = mappings.first?.outcome, let first = notifications.first
        else { throw BenchError("the sample event maps to no notification: \(mappings)") }
        return first.notification
    }
}

/// `pushbridge simulator` in a child process; its port is read from its first line of output.
struct SimulatorProcess {
    let process: Process
    let port: Int

    static func start(pushbridge: String, arguments: [String]) throws -> SimulatorProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pushbridge)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        // The port line comes first; the simulator prints nothing else until it stops.
        var text = ""
        while true {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
            // "APNs simulator listening on 127.0.0.1:PORT (statistics: ...)"
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("APNs simulator listening on ") })
            else { continue }
            let address = line.dropFirst("APNs simulator listening on ".count).prefix { $0 != " " }
            guard let port = address.split(separator: ":").last.flatMap({ Int($0) }) else { break }
            return SimulatorProcess(process: process, port: port)
        }
        process.terminate()
        throw BenchError("the simulator did not print its port")
    }

    func stop() {
        if self.process.isRunning { self.process.terminate() }
    }
}

/// h2load (nghttp2's load client) with one connection and 100 streams, sending `request` with the JWT.
enum H2Load {
    struct Result {
        var rate: Double
        var succeeded: Int
        var cpuMicrosecondsPerRequest: Double
    }

    static func run(
        request: APNSCore.Notification, jwt: String, port: Int, requestCount: Int, directory: String
    ) async throws -> Result {
        let bodyPath = (directory as NSString).appendingPathComponent("h2load-body.json")
        try Data(request.payload).write(to: URL(fileURLWithPath: bodyPath))
        var arguments = ["-n", "\(requestCount)", "-c", "1", "-m", "100", "-d", bodyPath]
        for header in request.apnsHeaders { arguments += ["-H", "\(header.name): \(header.value)"] }
        arguments += ["-H", "authorization: bearer \(jwt)"]
        arguments.append("https://127.0.0.1:\(port)\(request.path)")
        print(
            "  h2load \(arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " "))"
                .replacingOccurrences(of: jwt, with: "<jwt>"))

        let before = Self.childrenCPUSeconds()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["h2load"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = try output.fileHandleForReading.readToEnd() ?? Data()
        process.waitUntilExit()
        let cpu = Self.childrenCPUSeconds() - before
        let text = String(decoding: data, as: UTF8.self)
        // "finished in 2.34s, 85470.09 req/s, 10.2MB/s" and "status codes: 200000 2xx, 0 3xx, ..."
        guard let finished = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let rate = finished.split(separator: ",").dropFirst().first
                .flatMap({ Double($0.trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) }),
            let statuses = text.split(separator: "\n").first(where: { $0.hasPrefix("status codes:") }),
            let succeeded = Int(statuses.dropFirst("status codes: ".count).split(separator: " ")[0])
        else { throw BenchError("unexpected h2load output:\n\(text)") }
        return Result(rate: rate, succeeded: succeeded, cpuMicrosecondsPerRequest: cpu / Double(requestCount) * 1e6)
    }

    private static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
