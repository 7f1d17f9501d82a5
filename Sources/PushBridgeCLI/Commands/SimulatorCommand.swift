import APNSSimulator
import ArgumentParser
import Foundation
import NIOSSL

/// `pushbridge simulator`: run the APNs simulator standalone until SIGINT/SIGTERM, then print its counts.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "Run the APNs simulator standalone (HTTP/2 over TLS, answers like APNs). See docs/simulator.md.",
        discussion: """
            Without --tls-cert/--tls-key it writes a self-signed certificate for localhost and 127.0.0.1 and
            prints its path; clients trust it with --ca-file. GET /_simulator/stats answers the counts as JSON;
            they are also printed at shutdown.
            """
    )

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The port (0: any free port; the chosen one is printed).")
    var port: Int = 2197

    @Option(help: "The server certificate (PEM).")
    var tlsCert: String?

    @Option(help: "The server private key (PEM).")
    var tlsKey: String?

    @Option(help: "Where the self-signed certificate is written when no --tls-cert is given.")
    var tlsDirectory: String = (NSTemporaryDirectory() as NSString).appendingPathComponent("pushbridge-simulator")

    @Option(
        parsing: .singleValue,
        help:
            "A provider-token key to accept: KID=FILE or FILE (KID from an AuthKey_KID.p8 name); any team. Repeatable."
    )
    var jwtKey: [String] = []

    @Option(help: "A scenario file (docs/simulator.md).")
    var scenario: String?

    @Option(
        help: """
            Also run a legacy binary provider gateway on this port (0: any free port); it needs the scenario's \
            client CA (clients authenticate with certificates). See docs/binary-protocol.md.
            """)
    var binaryPort: Int?

    @Option(
        help: """
            Also run the binary protocol's feedback service on this port (0: any free port; needs --binary-port): \
            each connection gets the tokens the binary gateway refused as invalid since the last one, then is closed.
            """)
    var feedbackPort: Int?

    /// A port outside 0...65535 is a usage error (exit 2); handed to NIO it would trap.
    func validate() throws {
        guard (0...65_535).contains(self.port) else {
            throw ValidationError("--port must be between 0 and 65535, got \(self.port)")
        }
        if let binaryPort = self.binaryPort, !(0...65_535).contains(binaryPort) {
            throw ValidationError("--binary-port must be between 0 and 65535, got \(binaryPort)")
        }
        if let feedbackPort = self.feedbackPort {
            guard (0...65_535).contains(feedbackPort) else {
                throw ValidationError("--feedback-port must be between 0 and 65535, got \(feedbackPort)")
            }
            guard self.binaryPort != nil else {
                throw ValidationError(
                    "--feedback-port needs --binary-port: it reports the tokens the binary gateway refuses")
            }
        }
    }

    func run() async throws {
        // Listen for SIGINT/SIGTERM before anything is announced: a script that reads the port line and stops the
        // simulator at once must not find the signal ignored while dispatch is still registering its sources.
        let termination = TerminationSignals()
        var scenario = SimulatorScenario()
        do {
            if let file = self.scenario {
                scenario = try SimulatorScenario.load(file: file)
            }
            for argument in self.jwtKey {
                scenario.jwtKeys.append(try SimulatorScenario.JWTKey.commandLineArgument(argument))
            }
        } catch {
            FileHandleOutput.standardError("error: \(error)\n")
            throw ExitCode(2)
        }
        guard (self.tlsCert == nil) == (self.tlsKey == nil) else {
            FileHandleOutput.standardError("error: give both --tls-cert and --tls-key, or neither\n")
            throw ExitCode(2)
        }
        let certificatePath: String
        let keyPath: String
        if let certificate = self.tlsCert, let key = self.tlsKey {
            certificatePath = certificate
            keyPath = key
        } else {
            let generated = try SelfSignedCertificate.generate(in: self.tlsDirectory)
            certificatePath = generated.certificatePath
            keyPath = generated.privateKeyPath
            print("wrote a self-signed certificate to \(generated.certificatePath) (clients: --ca-file it)")
        }
        let server: APNSSimulatorServer
        do {
            server = try await APNSSimulatorServer.start(
                scenario: scenario,
                certificatePEMPath: certificatePath,
                privateKeyPEMPath: keyPath,
                host: self.host,
                port: self.port
            )
        } catch {
            FileHandleOutput.standardError(
                "error: the simulator could not start on \(self.host):\(self.port): \(error)\n")
            throw ExitCode(1)
        }
        print("APNs simulator listening on \(self.host):\(server.port) (statistics: GET /_simulator/stats)")
        var gateway: BinaryGateway?
        var feedback: BinaryFeedbackService?
        if let binaryPort = self.binaryPort {
            guard let clientCA = scenario.clientCAFile else {
                FileHandleOutput.standardError(
                    "error: --binary-port needs the scenario's certificate_auth.client_ca_file: binary clients authenticate with certificates\n"
                )
                await server.shutdown()
                throw ExitCode(2)
            }
            var behaviour = scenario.binaryGateway
            // A token the scenario marks unregistered or bad is an invalid token to the binary gateway (status 8).
            behaviour.unregisteredTokens.formUnion(Set(scenario.unregisteredTokens.keys).union(scenario.badTokens))
            do {
                gateway = try await BinaryGateway.start(
                    behaviour: behaviour, certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath),
                    privateKey: try NIOSSLPrivateKey(file: keyPath, format: .pem),
                    clientCertificateTrustRoots: try NIOSSLCertificate.fromPEMFile(clientCA), host: self.host,
                    port: binaryPort)
            } catch {
                FileHandleOutput.standardError(
                    "error: the binary gateway could not start on \(self.host):\(binaryPort): \(error)\n")
                await server.shutdown()
                throw ExitCode(1)
            }
            print(
                "binary gateway listening on \(self.host):\(gateway?.port ?? 0) (client certificates from \(clientCA))")
            if let gateway, let feedbackPort = self.feedbackPort {
                do {
                    feedback = try await BinaryFeedbackService.start(
                        gateway: gateway, certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath),
                        privateKey: try NIOSSLPrivateKey(file: keyPath, format: .pem),
                        clientCertificateTrustRoots: try NIOSSLCertificate.fromPEMFile(clientCA), host: self.host,
                        port: feedbackPort)
                } catch {
                    FileHandleOutput.standardError(
                        "error: the feedback service could not start on \(self.host):\(feedbackPort): \(error)\n")
                    await gateway.close()
                    await server.shutdown()
                    throw ExitCode(1)
                }
                print("feedback service listening on \(self.host):\(feedback?.port ?? 0)")
            }
        }
        if scenario.jwtKeys.isEmpty && scenario.clientCAFile == nil {
            print("note: no JWT keys and no client CA configured, so every request is answered 403")
        }
        // Scripts wait for the port line; standard output may be a pipe, so push it out now.
        fflush(nil)
        await termination.wait()
        await server.shutdown()
        print(server.statistics.summary)
        if let gateway {
            await gateway.close()
            let statistics = gateway.statistics
            print(
                "binary gateway: \(statistics.connections) connections, \(statistics.processedCount) notifications "
                    + "processed, \(statistics.errorPacketCount) error packets")
        }
        if let feedback {
            await feedback.close()
            let statistics = feedback.statistics
            print("feedback service: \(statistics.connections) connections, \(statistics.tuplesSent) tokens reported")
        }
    }

}

/// SIGINT and SIGTERM, taken from their default action (ending the process) and delivered to ``wait()``.
private struct TerminationSignals {
    private let stream: AsyncStream<Void>
    private let sources: [any DispatchSourceSignal]

    init() {
        let signals = [SIGINT, SIGTERM]
        for number in signals { signal(number, SIG_IGN) }
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        self.stream = stream
        self.sources = signals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
    }

    /// Returns at the first signal.
    func wait() async {
        for await _ in self.stream { break }
        for source in self.sources { source.cancel() }
    }
}
