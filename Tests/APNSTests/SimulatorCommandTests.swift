import APNSClient
import APNSCore
import BinaryProvider
import Crypto
import Foundation
import Synchronization
import TestSupport
import TestWaiting
import Testing

@Suite("pushbridge simulator (the built executable)", .timeLimit(.minutes(1)))
struct SimulatorCommandTests {
    @Test("prints its certificate and port, answers a client, and prints its counts on SIGTERM")
    func standalone() async throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = P256.Signing.PrivateKey()
        let p8 = try Fixtures.writeP8(key, in: directory)
        let tlsDirectory = (directory as NSString).appendingPathComponent("tls")

        let output = ProcessOutput()
        let process = try PushBridgeExecutable.start(
            ["simulator", "--port", "0", "--jwt-key", p8, "--tls-directory", tlsDirectory],
            standardOutput: output.pipe
        ).process
        defer { if process.isRunning { process.terminate() } }

        let started = try #require(await output.wait(containing: "listening on"))
        let portText = try #require(started.firstMatch(of: /127\.0\.0\.1:(\d+)/)?.1)
        let port = try #require(Int(portText))
        #expect(started.contains("simulator-cert.pem"))

        let client = APNSClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: port),
                authentication: .token(
                    ProviderTokenSource(
                        key: SigningKey(keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: key))
                ),
                requestTimeout: .seconds(5),
                additionalTrustRootsPEMFile: (tlsDirectory as NSString).appendingPathComponent("simulator-cert.pem"),
                trustSystemRoots: false
            )
        ).running()
        let result = await client.send(Fixtures.notification())
        await client.shutdown()
        #expect(result.status == 200)

        process.terminate()
        let final = try #require(await output.wait(containing: "status 200: 1"))
        #expect(final.contains("requests received: 1"))
    }
}

@Suite("pushbridge simulator --binary-port (the built executable)", .timeLimit(.minutes(1)))
struct SimulatorBinaryCommandTests {
    /// A running `pushbridge simulator --binary-port 0` with `scenario` (plus the client CA), its output, and a
    /// binary client configuration for its gateway.
    struct Running {
        let process: Process
        let output: ProcessOutput
        let port: String
        let client: BinaryClientConfiguration
        /// The feedback service's port, when started with one.
        let feedbackPort: Int?
    }

    static func start(_ tls: TestTLS, scenario: String, feedback: Bool = false) async throws -> Running {
        let scenarioPath = tls.directory.appendingPathComponent("scenario.yaml").path
        try Data(
            "certificate_auth:\n  client_ca_file: \(tls.caCertificatePath)\n\(scenario)".utf8
        ).write(to: URL(fileURLWithPath: scenarioPath))
        let output = ProcessOutput()
        let process = try PushBridgeExecutable.start(
            [
                "simulator", "--port", "0", "--binary-port", "0", "--scenario", scenarioPath,
                "--tls-cert", tls.serverCertificatePath, "--tls-key", tls.serverKeyPath,
            ] + (feedback ? ["--feedback-port", "0"] : []),
            standardOutput: output.pipe
        ).process
        let started = try #require(
            await output.wait(containing: feedback ? "feedback service listening on" : "binary gateway listening on"))
        let portText = try #require(started.firstMatch(of: /binary gateway listening on 127\.0\.0\.1:(\d+)/)?.1)
        var configuration = BinaryClientConfiguration(
            host: "127.0.0.1", port: try #require(Int(portText)),
            credentials: CertificateCredentials(
                certificateChain: try tls.clientCertificateChain(), privateKey: try tls.clientPrivateKey()))
        configuration.additionalTrustRootsPEMFile = tls.caCertificatePath
        configuration.quietWindow = .seconds(1)
        let feedbackPort = started.firstMatch(of: /feedback service listening on 127\.0\.0\.1:(\d+)/).flatMap {
            Int($0.1)
        }
        return Running(
            process: process, output: output, port: String(portText), client: configuration, feedbackPort: feedbackPort)
    }

    @Test("--feedback-port serves the tokens the gateway refused and the scenario's feedback_tokens, each once")
    func feedbackService() async throws {
        let tls = try TestTLS.generate()
        let unregistered = Fixtures.deviceToken(2)
        let onlyFeedback = String(repeating: "fe", count: 32)
        let running = try await Self.start(
            tls,
            scenario: """
                tokens:
                  unregistered: ["\(unregistered)"]
                binary_gateway:
                  feedback_tokens: [{token: \(onlyFeedback), time: 1700000000}]

                """,
            feedback: true)
        defer { if running.process.isRunning { running.process.terminate() } }
        let client = try BinaryClient(configuration: running.client)
        for index in 0..<3 {
            _ = await client.send(Fixtures.notification(token: Fixtures.deviceToken(index)))
        }
        await client.close()
        var configuration = FeedbackClientConfiguration(
            host: "127.0.0.1", port: try #require(running.feedbackPort), credentials: running.client.credentials)
        configuration.additionalTrustRootsPEMFile = tls.caCertificatePath
        let feedback = try FeedbackClient(configuration: configuration)
        let first = try await feedback.poll()
        #expect(first.end == .closed)
        #expect(first.tuples.map(\.deviceToken) == [onlyFeedback, unregistered])
        #expect(first.tuples.first?.timeEpochSeconds == 1_700_000_000)
        #expect(try await feedback.poll().tuples.isEmpty, "reading drained the list")
        running.process.terminate()
        let final = try #require(await running.output.wait(containing: "tokens reported"))
        #expect(final.contains("feedback service: 2 connections, 2 tokens reported"))
    }

    @Test("--feedback-port without --binary-port is a usage error")
    func feedbackNeedsBinaryPort() async throws {
        let result = try await PushBridgeExecutable.run(["simulator", "--port", "0", "--feedback-port", "0"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("--feedback-port needs --binary-port"), "\(result.standardError)")
    }

    @Test("the scenario's binary_gateway faults reach the gateway: a processing error on the first notification")
    func scenarioFaults() async throws {
        let tls = try TestTLS.generate()
        let running = try await Self.start(tls, scenario: "binary_gateway: {processing_error_at: 1}\n")
        defer { if running.process.isRunning { running.process.terminate() } }
        let client = try BinaryClient(configuration: running.client)
        let first = await client.send(Fixtures.notification(token: Fixtures.deviceToken(1)))
        let second = await client.send(Fixtures.notification(token: Fixtures.deviceToken(2)))
        await client.close()
        #expect(first.status == 500)
        #expect(second.status == 200)
    }

    @Test("runs a binary gateway beside the HTTP/2 one: a certificate client is answered, listed tokens are refused")
    func binaryGateway() async throws {
        let tls = try TestTLS.generate()
        let unregistered = Fixtures.deviceToken(2)
        let running = try await Self.start(tls, scenario: "tokens:\n  unregistered: [\"\(unregistered)\"]\n")
        let (process, output, portText) = (running.process, running.output, running.port)
        defer { if process.isRunning { process.terminate() } }
        let configuration = running.client
        let client = try BinaryClient(configuration: configuration)
        var statuses: [Int] = []
        for index in 0..<3 {
            if case .answered(let response) = await client.send(
                Fixtures.notification(token: Fixtures.deviceToken(index)))
            {
                statuses.append(response.status)
            }
        }
        await client.close()
        #expect(statuses == [200, 200, 400])

        // pushbridge send --protocol binary, against the same gateway.
        let send = [
            "send", "--protocol", "binary", "--gateway", "127.0.0.1:\(portText)", "--cert-file",
            tls.clientCertificatePath, "--key-file", tls.clientKeyPath, "--ca-file", tls.caCertificatePath,
            "--topic", "com.example.app", "--alert", "hi", "--token",
        ]
        let (delivered, deliveredOutput) = try await SendCommandTests.run(send + [Fixtures.deviceToken(5)])
        #expect(delivered == 0, "\(deliveredOutput)")
        #expect(deliveredOutput.contains("status: 200"))
        let (refused, refusedOutput) = try await SendCommandTests.run(send + [unregistered])
        #expect(refused == 1)
        #expect(refusedOutput.contains("reason: BadDeviceToken"))
        let p8 = try Fixtures.writeP8(P256.Signing.PrivateKey(), in: tls.directory.path)
        let (usage, _) = try await SendCommandTests.run(
            [
                "send", "--protocol", "binary", "--gateway", "127.0.0.1:\(portText)", "--key-file", p8, "--key-id",
                Fixtures.keyID, "--team-id", Fixtures.teamID, "--topic", "com.example.app", "--token",
                Fixtures.deviceToken(1),
            ])
        #expect(usage == 2, "token auth with the binary protocol is a usage error")

        process.terminate()
        let final = try #require(await output.wait(containing: "error packets"))
        #expect(final.contains("3 notifications processed, 2 error packets"))
    }
}
