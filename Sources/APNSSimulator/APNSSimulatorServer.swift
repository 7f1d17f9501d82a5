import APNSCore
import HTTP2
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The APNs simulator on the network: an HTTP/2-over-TLS server (the HTTP2 module's) whose every request is
/// decided by a ``SimulatorEngine``, and whose connections misbehave as the scenario says (GOAWAY after N
/// streams, stream-limit changes, drops). `GET /_simulator/stats` answers the counts as JSON.
package final class APNSSimulatorServer: Sendable {
    /// The path that answers the statistics.
    package static let statisticsPath = "/_simulator/stats"

    /// The engine that decides and counts.
    package let engine: SimulatorEngine
    private let server: HTTP2Server

    private init(engine: SimulatorEngine, server: HTTP2Server) {
        self.engine = engine
        self.server = server
    }

    /// Starts a simulator for `scenario` on `host:port` (0: an ephemeral port) with the given server
    /// certificate. When the scenario names a client CA, clients must present a certificate it signed and are
    /// then authenticated by it (certificate-based authentication).
    package static func start(
        scenario: SimulatorScenario,
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        host: String = "127.0.0.1",
        port: Int = 0,
        clock: any WallClock = SystemWallClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.simulator")
    ) async throws -> APNSSimulatorServer {
        var clientRoots: [NIOSSLCertificate]?
        if let caFile = scenario.clientCAFile {
            clientRoots = try NIOSSLCertificate.fromPEMFile(caFile)
        }
        let configuration = HTTP2ServerConfiguration(
            host: host,
            port: port,
            certificateChain: certificateChain,
            privateKey: privateKey,
            clientCertificateTrustRoots: clientRoots,
            maxConcurrentStreams: scenario.maxConcurrentStreams,
            goAwayAfterStreams: scenario.goawayAfterStreams,
            goAwayDebugData: ErrorBody(reason: .shutdown).jsonBytes
        )
        let engine = SimulatorEngine(scenario: scenario, clock: clock)
        let serverBox = ServerReference()
        let server = try await HTTP2Server.start(
            configuration: configuration,
            eventLoopGroup: eventLoopGroup,
            logger: logger
        ) { request, context, responder in
            Self.handle(
                request, context: context, responder: responder, engine: engine, server: serverBox,
                eventLoopGroup: eventLoopGroup
            )
        }
        serverBox.value = server
        return APNSSimulatorServer(engine: engine, server: server)
    }

    /// Starts a simulator with the server certificate and key read from PEM files.
    package static func start(
        scenario: SimulatorScenario,
        certificatePEMPath: String,
        privateKeyPEMPath: String,
        host: String = "127.0.0.1",
        port: Int = 0,
        clock: any WallClock = SystemWallClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.simulator")
    ) async throws -> APNSSimulatorServer {
        try await self.start(
            scenario: scenario,
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePEMPath),
            privateKey: try NIOSSLPrivateKey(file: privateKeyPEMPath, format: .pem),
            host: host,
            port: port,
            clock: clock,
            eventLoopGroup: eventLoopGroup,
            logger: logger
        )
    }

    /// The bound port.
    package var port: Int { self.server.port }

    /// What the simulator received and answered so far.
    package var statistics: SimulatorStatistics { self.engine.statistics }

    /// Waits until at least `count` requests were answered (``SimulatorStatistics/requestsAnswered``), woken by
    /// each answer rather than polling; `false` when `timeout` passed first.
    package func waitForAnswers(_ count: Int, timeout: Duration) async -> Bool {
        await self.engine.waitForAnswers(count, deadline: .now + timeout)
    }

    /// Waits until `condition` holds for ``statistics``, woken by each request handled; `false` when `timeout` passed
    /// first.
    package func waitForStatistics(
        timeout: Duration, until condition: @escaping @Sendable (SimulatorStatistics) -> Bool
    ) async -> Bool {
        await self.engine.waitForStatistics(deadline: .now + timeout, until: condition)
    }

    /// The first requests received, in order, when the scenario asks for them (`receive_log`).
    package var receivedRequests: [ReceivedRequest] { self.engine.receivedRequests }

    /// The transport's counters (connections, streams, PINGs).
    package var transportStatistics: HTTP2ServerStatistics { self.server.statistics }

    /// Trusts the provider key `key` from now on (``SimulatorEngine/trust(_:)``).
    package func trust(_ key: SimulatorScenario.JWTKey) {
        self.engine.trust(key)
    }

    /// Refuses every provider token the key `keyID` signed from now on (``SimulatorEngine/revoke(keyID:)``).
    package func revoke(keyID: String) {
        self.engine.revoke(keyID: keyID)
    }

    /// Announces a new stream limit on every live connection and on later ones.
    package func setMaxConcurrentStreams(_ streams: Int) {
        self.server.setMaxConcurrentStreams(streams)
    }

    /// Stops listening and closes every connection.
    package func shutdown() async {
        await self.server.shutdown()
    }

    private static func handle(
        _ request: HTTP2ServerRequest,
        context: HTTP2ServerConnectionContext,
        responder: HTTP2ServerResponder,
        engine: SimulatorEngine,
        server: ServerReference,
        eventLoopGroup: any EventLoopGroup
    ) {
        if request.method == "GET" && request.path == Self.statisticsPath {
            responder.respond(
                HTTP2ServerResponse(
                    status: 200,
                    headers: [HTTP2Header("content-type", "application/json")],
                    body: Array(engine.statistics.json.utf8)
                )
            )
            return
        }
        for action in engine.connectionActions(connectionID: context.connectionID, streamCount: context.streamCount) {
            switch action {
            case .setMaxConcurrentStreams(let streams):
                server.value?.setMaxConcurrentStreams(streams, connectionID: context.connectionID)
            }
        }
        let decision = engine.handle(
            SimulatorRequest(
                method: request.method,
                path: request.path,
                headers: request.headers.map { (name: $0.name, value: $0.value) },
                body: request.body,
                connectionID: context.connectionID,
                streamNumber: context.streamCount,
                certificateAuthenticated: context.peerCertificate != nil,
                clientCertificate: context.peerCertificate.flatMap(SimulatorRequest.fingerprint(of:))
            )
        )
        switch decision {
        case .respond(let answer, let delay):
            let response = HTTP2ServerResponse(
                status: answer.status,
                headers: answer.headers.map { HTTP2Header($0.name, $0.value, indexing: Self.indexing(of: $0.name)) },
                body: answer.body
            )
            if delay == .zero {
                responder.respond(response)
            } else {
                eventLoopGroup.any().scheduleTask(in: TimeAmount(delay)) { responder.respond(response) }
            }
        case .ignore:
            break
        case .dropConnection(let delay):
            let connectionID = context.connectionID
            eventLoopGroup.any().scheduleTask(in: TimeAmount(delay)) {
                server.value?.dropConnections(connectionID: connectionID)
                engine.connectionClosed(connectionID)
            }
        }
    }
}

extension APNSSimulatorServer {
    /// HPACK indexing of an answer's header: `apns-id` and `apns-unique-id` differ in every answer, so adding them
    /// to the dynamic table would only evict the fields that repeat (`date`, `content-type`).
    fileprivate static func indexing(of name: String) -> HTTP2HeaderIndexing {
        name == "apns-id" || name == "apns-unique-id" ? .never : .incremental
    }
}

/// The server, reachable from its own request handler once it has started.
private final class ServerReference: Sendable {
    private let server = Mutex<HTTP2Server?>(nil)

    var value: HTTP2Server? {
        get { self.server.withLock { $0 } }
        set { self.server.withLock { $0 = newValue } }
    }
}
