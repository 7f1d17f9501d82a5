// Legacy binary provider protocol benchmark: PushBridge's BinaryClient over ONE TLS connection with a client
// certificate to `pushbridge simulator --binary-port` (its own process), then, in the same run, a reference: the
// same notifications pre-encoded and written by a bare SwiftNIO TLS client in 64 KiB writes (what the wire and
// the gateway allow, with no per-notification work on the client). Prints notifications/s, CPU per notification of
// the client (getrusage) and of the gateway (/proc), and peak RSS.
//
//   make bench-binary                                          # 200k notifications, quiet window 100 ms
//   .build/release/BinaryBench --notifications 50000 --quiet-window-ms 1000 --max-unconfirmed 10000
//
// The binary protocol never acknowledges success, so a notification completes (delivered) a quiet window after it
// was written: the client can carry at most max-unconfirmed / quiet-window notifications per second on one
// connection, printed as "window cap". The reference ends with one notification for a token the gateway refuses:
// its error packet arrives once the gateway processed everything before it.

import APNSClient
import APNSCore
import BenchSupport
import BinaryProvider
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var notifications = 200_000
    var quietWindowMilliseconds = 100
    var maxUnconfirmed = 50_000
    /// Notifications handed to the client and not yet completed, like the bridge's `kafka.max_in_flight`.
    var inFlight = 60_000
    var pushbridge = ".build/release/pushbridge"

    static let usage = """
        usage: BinaryBench [--notifications N] [--quiet-window-ms N] [--max-unconfirmed N] [--in-flight N]
                           [--pushbridge PATH]
        """

    init(arguments: [String]) throws(BenchSupportError) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            guard let value = iterator.next() else {
                throw BenchSupportError("\(argument) needs a value\n\(Self.usage)")
            }
            if argument == "--pushbridge" {
                self.pushbridge = value
                continue
            }
            guard let number = Int(value), number > 0 else {
                throw BenchSupportError("\(argument) takes a positive number, got \(value)\n\(Self.usage)")
            }
            switch argument {
            case "--notifications": self.notifications = number
            case "--quiet-window-ms": self.quietWindowMilliseconds = number
            case "--max-unconfirmed": self.maxUnconfirmed = number
            case "--in-flight": self.inFlight = number
            default: throw BenchSupportError("unknown option \(argument)\n\(Self.usage)")
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

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// The notifications of a run: 1000 distinct tokens in turn, one small alert payload.
func makeNotifications(_ count: Int) -> [APNSCore.Notification] {
    let payload = Array(#"{"aps":{"alert":"hello","sound":"default"},"k":"0123456789"}"#.utf8)
    let tokens = (0..<1000).map { String(format: "%08x", $0) + String(repeating: "a1b2c3d4", count: 7) }
    return (0..<count).map { index in
        APNSCore.Notification(
            deviceToken: tokens[index % tokens.count], topic: "com.example.app", pushType: .alert, priority: .immediate,
            id: UUID(), payload: payload)
    }
}

/// Counts completions; the sender waits on it when `inFlight` are outstanding.
final class Completions: Sendable {
    private let done = Atomic<Int>(0)
    private let notDelivered = Atomic<Int>(0)

    func complete(_ result: APNSResult) {
        if case .answered(let response) = result, response.status == 200 {
        } else {
            self.notDelivered.add(1, ordering: .relaxed)
        }
        self.done.add(1, ordering: .releasing)
    }

    var count: Int { self.done.load(ordering: .acquiring) }
    var failures: Int { self.notDelivered.load(ordering: .relaxed) }
}

/// Sends `notifications` through `client` in batches of 500, keeping at most `inFlight` uncompleted; returns when
/// every one completed (the last a quiet window after it was written).
func sendAll(_ notifications: [APNSCore.Notification], client: BinaryClient, inFlight: Int) async throws -> Int {
    let completions = Completions()
    var submitted = 0
    while submitted < notifications.count {
        if submitted - completions.count + 500 > inFlight {
            try await Task.sleep(for: .milliseconds(1))
            continue
        }
        let end = min(notifications.count, submitted + 500)
        client.send(
            contentsOf: notifications[submitted..<end].map {
                APNSClient.Submission(notification: $0, completion: completions.complete)
            })
        submitted = end
    }
    let deadline = ContinuousClock.now + .seconds(120)
    while completions.count < notifications.count {
        guard ContinuousClock.now < deadline else {
            throw BenchSupportError("only \(completions.count) of \(notifications.count) completed within 120 s")
        }
        try await Task.sleep(for: .milliseconds(1))
    }
    return completions.failures
}

/// Reads what the gateway answers until it has an error packet or the connection closes.
final class AnswerReader: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let answer: EventLoopPromise<[UInt8]>
    private let received = Mutex<[UInt8]>([])

    init(answer: EventLoopPromise<[UInt8]>) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        let bytes = self.received.withLock { received in
            received += buffer.readBytes(length: buffer.readableBytes) ?? []
            return received
        }
        if bytes.count >= BinaryErrorResponse.byteCount { self.answer.succeed(bytes) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.answer.succeed(self.received.withLock { $0 })
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.answer.fail(error)
        context.close(promise: nil)
    }
}

/// The reference: `frames` written over one TLS connection in 64 KiB writes; returns once the gateway answered
/// (the last frame is refused, so its answer comes after everything before it was processed).
func writeReference(_ frames: [UInt8], port: Int, tls: TestTLS) async throws -> [UInt8] {
    var configuration = TLSConfiguration.makeClientConfiguration()
    configuration.trustRoots = .certificates([try tls.caCertificate()])
    configuration.certificateChain = try tls.clientCertificateChain().map { .certificate($0) }
    configuration.privateKey = .privateKey(try tls.clientPrivateKey())
    let context = try NIOSSLContext(configuration: configuration)
    let group = MultiThreadedEventLoopGroup.singleton
    let answer = group.any().makePromise(of: [UInt8].self)
    let channel = try await ClientBootstrap(group: group)
        .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    try NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                try channel.pipeline.syncOperations.addHandler(AnswerReader(answer: answer))
            }
        }
        .connect(host: "127.0.0.1", port: port).get()
    let chunk = 64 * 1024
    var offset = 0
    while offset < frames.count {
        let end = min(frames.count, offset + chunk)
        // Waiting for each write keeps at most one chunk queued, as the client's own flow does.
        try await channel.writeAndFlush(ByteBuffer(bytes: frames[offset..<end])).get()
        offset = end
    }
    let bytes = try await answer.futureResult.get()
    try? await channel.close()
    return bytes
}

@main
enum BinaryBench {
    static func main() async throws {
        let options: Options
        do {
            options = try Options(arguments: CommandLine.arguments)
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            exit(2)
        }
        let tls = try TestTLS.generate(name: "BinaryBench")
        defer { tls.remove() }
        let refusedToken = String(repeating: "0f", count: 32)
        let scenario = tls.directory.appendingPathComponent("scenario.yaml").path
        try Data(
            """
            certificate_auth: { client_ca_file: \(tls.caCertificatePath) }
            tokens: { unregistered: ["\(refusedToken)"] }
            """.utf8
        ).write(to: URL(fileURLWithPath: scenario))
        let simulatorArguments = [
            "simulator", "--port", "0", "--binary-port", "0", "--tls-cert", tls.serverCertificatePath, "--tls-key",
            tls.serverKeyPath, "--scenario", scenario,
        ]
        let simulator = try AnnouncingProcess.start(
            options.pushbridge, simulatorArguments,
            announcing: ["APNs simulator listening on ", "binary gateway listening on "])
        defer { simulator.stop() }
        let port = simulator.ports[1]

        // 1. PushBridge's BinaryClient: warm up, then measure.
        var configuration = BinaryClientConfiguration(
            host: "127.0.0.1", port: port,
            credentials: try CertificateCredentials.load(
                certificatePEMPath: tls.clientCertificatePath, keyPEMPath: tls.clientKeyPath))
        configuration.additionalTrustRootsPEMFile = tls.caCertificatePath
        configuration.quietWindow = .milliseconds(options.quietWindowMilliseconds)
        configuration.maxUnconfirmed = options.maxUnconfirmed
        let client = try BinaryClient(configuration: configuration)
        _ = try await sendAll(makeNotifications(2_000), client: client, inFlight: options.inFlight)
        let notifications = makeNotifications(options.notifications)
        let clientCPUBefore = ProcessCPU.seconds(ProcessCPU.ownProcess)
        let gatewayCPUBefore = ProcessCPU.seconds(pid: simulator.pid)
        let start = ContinuousClock.now
        let failures = try await sendAll(notifications, client: client, inFlight: options.inFlight)
        let clientSeconds = seconds(ContinuousClock.now - start)
        let clientCPU = ProcessCPU.seconds(ProcessCPU.ownProcess) - clientCPUBefore
        let gatewayCPU = ProcessCPU.seconds(pid: simulator.pid) - gatewayCPUBefore
        let clientRSS = peakRSSMebibytes()
        await client.close()
        guard failures == 0 else { throw BenchSupportError("\(failures) notifications were not delivered") }

        // 2. The reference: the same notifications pre-encoded (not measured), written raw, then a refused one.
        var frames: [UInt8] = []
        for (index, notification) in notifications.enumerated() {
            try BinaryFrame.append(
                notification, identifier: UInt32(index + 1), format: .framed,
                payloadLimitBytes: BinaryFrame.framedPayloadLimitBytes, to: &frames)
        }
        let marker = UInt32(notifications.count + 1)
        var refused = notifications[0]
        refused.deviceToken = refusedToken
        try BinaryFrame.append(
            refused, identifier: marker, format: .framed, payloadLimitBytes: BinaryFrame.framedPayloadLimitBytes,
            to: &frames)
        let referenceCPUBefore = ProcessCPU.seconds(ProcessCPU.ownProcess)
        let referenceGatewayCPUBefore = ProcessCPU.seconds(pid: simulator.pid)
        let referenceStart = ContinuousClock.now
        let answer = try await writeReference(frames, port: port, tls: tls)
        let referenceSeconds = seconds(ContinuousClock.now - referenceStart)
        let referenceCPU = ProcessCPU.seconds(ProcessCPU.ownProcess) - referenceCPUBefore
        let referenceGatewayCPU = ProcessCPU.seconds(pid: simulator.pid) - referenceGatewayCPUBefore
        guard let packet = BinaryErrorResponse(answer.prefix(BinaryErrorResponse.byteCount)),
            packet.identifier == marker
        else {
            throw BenchSupportError("the reference got \(answer) instead of an error packet for identifier \(marker)")
        }

        let count = Double(options.notifications)
        let clientRate = count / clientSeconds
        let referenceRate = count / referenceSeconds
        let cap = Double(options.maxUnconfirmed) / (Double(options.quietWindowMilliseconds) / 1000)
        func format(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        print(
            """
            binary provider protocol (framed), \(options.notifications) notifications, ONE TLS connection with a \
            client certificate, payload \(notifications[0].payload.count) B, to pushbridge simulator --binary-port
            pushbridge BinaryClient: \(format(clientRate)) notifications/s (quiet window \
            \(options.quietWindowMilliseconds) ms, max_unconfirmed \(options.maxUnconfirmed): window cap \
            \(format(cap))/s; the last completes one quiet window after it was written), \
            CPU \(format(clientCPU * 1e6 / count, 2)) µs/notification, peak RSS \(format(clientRSS, 1)) MiB; \
            gateway CPU \(format(gatewayCPU * 1e6 / count, 2)) µs/notification
            reference (pre-encoded frames, bare NIO TLS writes of 64 KiB): \(format(referenceRate)) notifications/s, \
            CPU \(format(referenceCPU * 1e6 / count, 2)) µs/notification; gateway CPU \
            \(format(referenceGatewayCPU * 1e6 / count, 2)) µs/notification
            ratio pushbridge / reference: \(format(clientRate / referenceRate, 2))
            """
        )
    }
}
