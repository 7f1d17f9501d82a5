// APNs-shaped HTTP/2 sender benchmark: PushBridge's HTTP2ClientConnection against nghttpd over ONE TLS
// connection, then h2load (nghttp2's own client) with the same headers and body against the same server, in the
// same run; then h2load against PushBridge's HTTP2Server (the APNs simulator's engine). Prints the rates, the
// client's ratio to h2load, CPU time per request (getrusage) and peak RSS.
//
//   make bench-apns                       # 200k requests
//   .build/release/APNSBench --requests 50000 --workers 300
//
// The request sender is one `@Sendable () async throws -> Int` closure (see `makeSender`), so the APNs client can
// take the HTTP/2 connection's place without touching the measurement.

import BenchSupport
import Foundation
import HTTP2
import NIOSSL
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var requests = 200_000
    var workers = 300
    var streams = 100
    /// nghttpd's port; `nil`: a free one.
    var port: Int?

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            let value = iterator.next().flatMap { Int($0) }
            switch (argument, value) {
            case ("--requests", let value?): self.requests = value
            case ("--workers", let value?): self.workers = value
            case ("--streams", let value?): self.streams = value
            case ("--port", let value?): self.port = value
            default:
                FileHandle.standardError.write(
                    Data("usage: APNSBench [--requests N] [--workers N] [--streams N] [--port N]\n".utf8)
                )
                exit(2)
            }
        }
    }
}

/// Peak resident set size of this process, in MiB.
func peakRSSMebibytes() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_maxrss) / 1024
}

@discardableResult
func run(_ executable: String, _ arguments: [String], output: Pipe? = nil) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [executable] + arguments
    process.standardOutput = output ?? FileHandle.nullDevice
    process.standardError = output ?? FileHandle.nullDevice
    try process.run()
    return process
}

/// Why the benchmark stopped (thrown, so that nghttpd is stopped on the way out).
struct BenchmarkError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Runs h2load with one connection; returns its rate (requests/s) and its CPU seconds.
func h2load(requests: Int, streams: Int, bodyFile: String, headers: [HTTP2Header], url: String) throws
    -> (Double, Double)
{
    let result = try H2Load.run(
        requests: requests, streams: streams, bodyFile: bodyFile, headers: headers.map { ($0.name, $0.value) },
        target: .url(url))
    guard result.succeeded == requests else {
        throw BenchmarkError("h2load got \(result.succeeded) 2xx of \(requests) against \(url)")
    }
    return (result.rate, result.cpuSeconds)
}

/// The sender under test: one HTTP/2 connection to nghttpd (retrying while nghttpd starts).
func makeSender(
    port: Int, certificateFile: String, request: HTTP2Request
) async throws -> (send: @Sendable () async throws -> Int, close: @Sendable () async -> Void) {
    var connection: HTTP2ClientConnection?
    for _ in 0..<50 where connection == nil {
        connection = try? await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1",
                port: port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: certificateFile, trustSystemRoots: false),
                maxConcurrentStreams: 1000
            )
        )
        if connection == nil { try await Task.sleep(for: .milliseconds(100)) }
    }
    guard let connection else { throw BenchmarkError("cannot connect to nghttpd on 127.0.0.1:\(port)") }
    return ({ try await connection.send(request).status }, { await connection.close() })
}

/// Sends `count` requests from `workers` concurrent tasks; returns the wall time and the non-200 count.
func measure(
    count: Int, workers: Int, send: @escaping @Sendable () async throws -> Int
) async throws -> (Double, Int) {
    let next = Counter()
    let start = ContinuousClock.now
    let failures = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<workers {
            group.addTask {
                var failures = 0
                while next.take(limit: count) {
                    if try await send() != 200 { failures += 1 }
                }
                return failures
            }
        }
        return try await group.reduce(0, +)
    }
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (seconds, failures)
}

/// Hands out request slots to the workers.
final class Counter: Sendable {
    private let taken = Atomic<Int>(0)

    func take(limit: Int) -> Bool {
        self.taken.wrappingAdd(1, ordering: .relaxed).newValue <= limit
    }
}

@main
enum APNSBench {
    static func main() async throws {
        let options = Options(arguments: CommandLine.arguments)
        let workDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-bench-\(getpid())")
        let token = String(repeating: "a1b2c3d4", count: 8)
        let path = "/3/device/\(token)"
        let authorization = "bearer " + String(repeating: "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9", count: 5)
        let bodyText = #"{"aps":{"alert":"hello","sound":"default"},"k":"0123456789"}"#
        let headers = [
            HTTP2Header("apns-topic", "com.example.app"),
            HTTP2Header("apns-push-type", "alert"),
            HTTP2Header("apns-priority", "10"),
            HTTP2Header("apns-id", "123e4567-e89b-12d3-a456-426614174000"),
            HTTP2Header("authorization", authorization, indexing: .never),
        ]

        // 1. A self-signed certificate (openssl) and a document root where the device path is an empty file (200).
        try NghttpdServer.createEmptyFiles(
            in: workDirectory.appendingPathComponent("docs/3/device").path, names: [token])
        let bodyFile = workDirectory.appendingPathComponent("body.json").path
        _ = FileManager.default.createFile(atPath: bodyFile, contents: Data(bodyText.utf8))
        let keyFile = workDirectory.appendingPathComponent("key.pem").path
        let certificateFile = workDirectory.appendingPathComponent("cert.pem").path
        let openssl = try run(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                keyFile,
                "-out", certificateFile, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ]
        )
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else {
            throw BenchmarkError("openssl could not create the test certificate")
        }

        // 2. nghttpd on 127.0.0.1, one worker, the stream limit both clients use.
        let nghttpd = try await NghttpdServer.start(
            documentRoot: workDirectory.appendingPathComponent("docs").path, certificatePath: certificateFile,
            privateKeyPath: keyFile, logFile: workDirectory.appendingPathComponent("nghttpd.log").path,
            maxConcurrentStreams: options.streams, port: options.port
        )
        defer {
            nghttpd.stop()
            try? FileManager.default.removeItem(at: workDirectory)
        }

        // 3. PushBridge's client: warm up, then measure.
        let request = HTTP2Request(
            method: "POST", path: path, authority: "127.0.0.1", headers: headers, body: Array(bodyText.utf8)
        )
        let sender = try await makeSender(port: nghttpd.port, certificateFile: certificateFile, request: request)
        _ = try await measure(count: 2_000, workers: options.workers, send: sender.send)
        let cpuBefore = ProcessCPU.seconds(ProcessCPU.ownProcess)
        let (clientSeconds, clientFailures) = try await measure(
            count: options.requests, workers: options.workers, send: sender.send
        )
        let clientCPU = ProcessCPU.seconds(ProcessCPU.ownProcess) - cpuBefore
        await sender.close()
        guard clientFailures == 0 else {
            throw BenchmarkError("\(clientFailures) requests did not get 200 from nghttpd")
        }

        // 4. h2load with the same headers and body, same server, same stream limit.
        let (h2loadRate, h2loadCPU) = try h2load(
            requests: options.requests, streams: options.streams, bodyFile: bodyFile, headers: headers,
            url: "https://127.0.0.1:\(nghttpd.port)\(path)"
        )

        // 5. h2load against PushBridge's HTTP2Server (the APNs simulator's engine) answering 200 at once.
        let server = try await HTTP2Server.start(
            configuration: HTTP2ServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificateFile),
                privateKey: try NIOSSLPrivateKey(file: keyFile, format: .pem),
                maxConcurrentStreams: options.streams
            )
        ) { _, _, responder in
            responder.respond(HTTP2ServerResponse(status: 200))
        }
        let serverCPUBefore = ProcessCPU.seconds(ProcessCPU.ownProcess)
        let (serverRate, _) = try h2load(
            requests: options.requests, streams: options.streams, bodyFile: bodyFile, headers: headers,
            url: "https://127.0.0.1:\(server.port)\(path)"
        )
        let serverCPU = ProcessCPU.seconds(ProcessCPU.ownProcess) - serverCPUBefore
        await server.shutdown()

        let clientRate = Double(options.requests) / clientSeconds
        print(
            """
            APNs-shaped POST, \(options.requests) requests, ONE TLS connection, \
            \(options.streams) streams (nghttpd -m), body \(bodyText.utf8.count) B, \
            authorization \(authorization.utf8.count) B
            pushbridge HTTP2ClientConnection: \(String(format: "%.0f", clientRate)) req/s, \
            CPU \(String(format: "%.2f", clientCPU * 1e6 / Double(options.requests))) µs/request, \
            peak RSS \(String(format: "%.1f", peakRSSMebibytes())) MiB (\(options.workers) sending tasks)
            h2load (nghttp2): \(String(format: "%.0f", h2loadRate)) req/s, \
            CPU \(String(format: "%.2f", h2loadCPU * 1e6 / Double(options.requests))) µs/request
            ratio pushbridge / h2load: \(String(format: "%.2f", clientRate / h2loadRate))
            server side, h2load as the client: PushBridge HTTP2Server \(String(format: "%.0f", serverRate)) req/s, \
            CPU \(String(format: "%.2f", serverCPU * 1e6 / Double(options.requests))) µs/request \
            (nghttpd \(String(format: "%.0f", h2loadRate)) req/s)
            """
        )
    }
}
