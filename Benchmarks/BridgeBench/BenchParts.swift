import APNSCore
import BenchSupport
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

/// h2load with one connection and 100 streams, sending the bridge's request for event 0 with the JWT.
enum H2LoadReference {
    static func run(
        request: APNSCore.Notification, jwt: String, port: Int, requestCount: Int, directory: String
    ) throws -> H2Load.Result {
        let bodyPath = (directory as NSString).appendingPathComponent("h2load-body.json")
        try Data(request.payload).write(to: URL(fileURLWithPath: bodyPath))
        return try H2Load.run(
            requests: requestCount, streams: 100, bodyFile: bodyPath,
            headers: request.apnsHeaders.map { ($0.name, $0.value) } + [("authorization", "bearer \(jwt)")],
            target: .url("https://127.0.0.1:\(port)\(request.path)"), printCommand: true, redacting: jwt)
    }
}
