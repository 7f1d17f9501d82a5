import APNSCore
import BenchSupport
import Configuration
import Foundation
import Routing

#if canImport(Glibc)
    import Glibc
#endif

extension EventFactory {
    /// The request the bridge sends for event 0, mapped through the benchmark's own configuration file.
    func sampleRequest(configurationPath: String) throws -> APNSCore.Notification {
        let loaded = try ConfigurationLoader().load(file: configurationPath)
        let event = self.event(0)
        let mappings = loaded.router.map(
            event: SourceEvent(
                topic: BridgeBench.inputTopic, partition: 0, offset: 0, key: event.key, value: event.value)
        )
        guard case .notifications(let notifications)? = mappings.first?.outcome, let first = notifications.first
        else { throw BenchError("the sample event maps to no notification: \(mappings)") }
        return first.notification
    }
}

/// The APNs server the bridge and h2load send to, in its own process: nghttpd or `pushbridge simulator`.
struct BenchServer {
    let server: BenchOptions.Server
    let pid: pid_t
    let port: Int
    /// How it was started, for the report.
    let description: String
    private let stopProcess: () -> Void

    /// CPU seconds (user + system) the server used so far.
    var cpuSeconds: Double { ProcessCPU.seconds(pid: self.pid) }

    func stop() {
        self.stopProcess()
    }

    /// nghttpd (one worker, `streams` concurrent streams) answering 200 with an empty body for the device path of
    /// each of `tokens`.
    static func nghttpd(
        tokens: [String], streams: Int, connectionWindowBits: Int?, certificatePath: String, keyPath: String,
        directory: String
    ) async throws -> BenchServer {
        let documents = (directory as NSString).appendingPathComponent("nghttpd")
        try NghttpdServer.createEmptyFiles(in: documents + "/3/device", names: tokens)
        let nghttpd = try await NghttpdServer.start(
            documentRoot: documents, certificatePath: certificatePath, privateKeyPath: keyPath,
            logFile: (directory as NSString).appendingPathComponent("nghttpd.log"), maxConcurrentStreams: streams,
            connectionWindowBits: connectionWindowBits)
        return BenchServer(
            server: .nghttpd, pid: nghttpd.pid, port: nghttpd.port, description: nghttpd.commandLine,
            stopProcess: nghttpd.stop)
    }

    /// `pushbridge simulator`; its port is read from its first line of output.
    static func simulator(pushbridge: String, arguments: [String]) throws -> BenchServer {
        let simulator = try AnnouncingProcess.start(
            pushbridge, arguments, announcing: ["APNs simulator listening on "])
        return BenchServer(
            server: .simulator, pid: simulator.pid, port: simulator.ports[0],
            description: "pushbridge " + arguments.joined(separator: " "), stopProcess: { simulator.stop() })
    }
}

/// h2load with one connection and `streams` streams, sending the bridge's request for event 0 with the JWT, to the
/// device paths of `paths` (the run's tokens) in turn (nghttpd answers 200 only for those).
enum H2LoadReference {
    /// The median rate and the median CPU per request of `runs` (each of its own run), the fewest 2xx answers,
    /// and the CPU of the run with the median CPU per request.
    static func median(of runs: [H2Load.Result]) -> H2Load.Result {
        let byCPU = runs.sorted { $0.cpuMicrosecondsPerRequest < $1.cpuMicrosecondsPerRequest }
        var result = byCPU[byCPU.count / 2]
        result.rate = runs.map(\.rate).sorted()[runs.count / 2]
        result.succeeded = runs.map(\.succeeded).min() ?? 0
        return result
    }

    static func run(
        request: APNSCore.Notification, jwt: String, paths: [String], port: Int, requestCount: Int, streams: Int,
        directory: String
    ) throws -> H2Load.Result {
        let bodyPath = (directory as NSString).appendingPathComponent("h2load-body.json")
        try Data(request.payload).write(to: URL(fileURLWithPath: bodyPath))
        let urlsPath = (directory as NSString).appendingPathComponent("h2load-urls.txt")
        let urls = paths.map {
            "https://127.0.0.1:\(port)/3/device/\($0)\n"
        }
        try Data(urls.joined().utf8).write(to: URL(fileURLWithPath: urlsPath))
        return try H2Load.run(
            requests: requestCount, streams: streams, bodyFile: bodyPath,
            headers: request.apnsHeaders.map { ($0.name, $0.value) } + [("authorization", "bearer \(jwt)")],
            target: .urlList(file: urlsPath), printCommand: true, redacting: jwt)
    }
}
