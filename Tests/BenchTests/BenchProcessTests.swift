import BenchSupport
import Foundation
import HTTP2
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The benchmarks' child processes: nghttpd answers the benchmark's device paths and stops when told to.
@Suite(.timeLimit(.minutes(1)))
struct BenchProcessTests {
    static let tls: TestTLS = {
        do { return try TestTLS.generate(name: "Bench") } catch { fatalError("cannot generate TLS material: \(error)") }
    }()

    /// Swift's threads block most signals and `posix_spawn` hands the mask on: nghttpd then ignored SIGTERM and
    /// outlived every benchmark run.
    @Test func childProcessesStartWithNoSignalBlockedAndStopOnSIGTERM() async throws {
        let child = try ChildProcess.spawn("/bin/sleep", ["60"], logFile: "/dev/null")
        let status = try String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)
        let blocked = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
        #expect(blocked?.split(separator: "\t").last == "0000000000000000")
        child.signal(SIGTERM)
        let (exitStatus, _) = try await child.wait(timeout: .seconds(10))
        #expect(exitStatus == 128 + SIGTERM)
    }

    /// A descriptor without close-on-exec, such as a listening socket, would stay open in the child after its owner
    /// closed it: another test's closed port went on accepting connections while a child of this suite ran.
    @Test func childProcessesInheritNoFileDescriptorButTheStandardOnes() async throws {
        let inheritable = open("/dev/null", O_RDONLY)
        #expect(inheritable > 2)
        defer { close(inheritable) }
        let child = try ChildProcess.spawn("/bin/sleep", ["60"], logFile: "/dev/null")
        // A process just started opens files of its own for a moment (the dynamic loader's cache, libraries,
        // locale data), which show up as descriptor 3 on a loaded machine; an inherited descriptor stays. So the
        // list is read until it is the standard three, for 30 s at least.
        var descriptors: [String] = []
        for _ in 0..<600 {
            descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd")
            if descriptors.sorted() == ["0", "1", "2"] { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        child.signal(SIGKILL)
        _ = try await child.wait(timeout: .seconds(10))
        #expect(descriptors.sorted() == ["0", "1", "2"])
    }

    @Test func nghttpdAnswers200ForTheDevicePathsOfItsDocumentRootAnd404ForOthers() async throws {
        let root = Self.tls.directory.appendingPathComponent("nghttpd-\(UUID())").path
        let tokens = EventFactory.deviceTokens(eventCount: 3)
        try NghttpdServer.createEmptyFiles(in: root + "/3/device", names: tokens)
        let server = try await NghttpdServer.start(
            documentRoot: root, certificatePath: Self.tls.serverCertificatePath,
            privateKeyPath: Self.tls.serverKeyPath, logFile: root + ".log")
        defer { server.stop() }
        let connection = try await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1", port: server.port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: Self.tls.caCertificatePath, trustSystemRoots: false)))
        for token in tokens + [EventFactory.deviceToken(3)] {
            let response = try await connection.send(
                HTTP2Request(method: "POST", path: "/3/device/\(token)", body: Array(#"{"aps":{}}"#.utf8)))
            #expect(response.status == (tokens.contains(token) ? 200 : 404))
        }
        await connection.close()

        server.stop()
        // Reaped by stop(): no such child any more.
        #expect(waitpid(server.pid, nil, WNOHANG) == -1)
    }
}

/// `make bench` and `make bench-binary` read the simulator's ports from its first lines of output.
@Suite(.timeLimit(.minutes(1)))
struct AnnouncingProcessTests {
    @Test func readsEveryAnnouncedPortOfTheSimulator() throws {
        let executable = try #require(PushBridgeExecutable.url, "the pushbridge executable is built with the tests")
        let tls = BenchProcessTests.tls
        let scenario = tls.directory.appendingPathComponent("announcing-\(UUID()).yaml").path
        try Data("certificate_auth: { client_ca_file: \(tls.caCertificatePath) }\n".utf8)
            .write(to: URL(fileURLWithPath: scenario))
        let simulator = try AnnouncingProcess.start(
            executable.path,
            [
                "simulator", "--port", "0", "--binary-port", "0", "--tls-cert", tls.serverCertificatePath,
                "--tls-key", tls.serverKeyPath, "--scenario", scenario,
            ],
            announcing: ["APNs simulator listening on ", "binary gateway listening on "])
        defer { simulator.stop() }
        #expect(simulator.ports.count == 2)
        #expect(simulator.ports.allSatisfy { $0 > 0 })
        #expect(simulator.ports[0] != simulator.ports[1])
        // Stopped right after its port lines, it still ends (a SIGTERM it missed would leave it running and keep
        // the test run waiting): stop() escalates to SIGKILL.
        simulator.stop()
        #expect(!simulator.process.isRunning)
    }

    @Test func aProcessThatEndsWithoutAnnouncingIsAnErrorQuotingItsOutput() {
        #expect {
            _ = try AnnouncingProcess.start("/bin/echo", ["nothing to see"], announcing: ["listening on "])
        } throws: { error in
            "\(error)".contains("did not print listening on") && "\(error)".contains("nothing to see")
        }
    }
}
