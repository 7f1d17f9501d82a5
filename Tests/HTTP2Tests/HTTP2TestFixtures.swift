import HTTP2
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

/// TLS material shared by the tests of this target (generated once per process).
enum Material {
    static let tls: TestTLS = {
        do { return try TestTLS.generate() } catch { fatalError("cannot generate test TLS material: \(error)") }
    }()
    static let otherTLS: TestTLS = {
        do { return try TestTLS.generate(name: "Other") } catch {
            fatalError("cannot generate test TLS material: \(error)")
        }
    }()
}

/// A server on 127.0.0.1 with the test CA's server certificate.
func startServer(
    tls: TestTLS = Material.tls,
    requireClientCertificate: Bool = false,
    maxConcurrentStreams: Int = 1000,
    goAwayAfterStreams: Int? = nil,
    acknowledgesPings: Bool = true,
    handler: @escaping HTTP2ServerHandler
) async throws -> HTTP2Server {
    var configuration = HTTP2ServerConfiguration(
        certificateChain: try tls.serverCertificateChain(),
        privateKey: try tls.serverPrivateKey(),
        clientCertificateTrustRoots: requireClientCertificate ? [try tls.caCertificate()] : nil,
        maxConcurrentStreams: maxConcurrentStreams,
        goAwayAfterStreams: goAwayAfterStreams,
        goAwayDebugData: Array(#"{"reason":"Shutdown"}"#.utf8)
    )
    configuration.acknowledgesPings = acknowledgesPings
    return try await HTTP2Server.start(configuration: configuration, handler: handler)
}

/// Client settings for `server`, trusting only the test CA.
func clientConfiguration(
    _ server: HTTP2Server,
    maxConcurrentStreams: Int = 1000,
    requestTimeout: Duration = .seconds(10),
    idlePingInterval: Duration = .seconds(60),
    pingTimeout: Duration = .seconds(2),
    clientCertificate: Bool = false
) throws -> HTTP2ClientConfiguration {
    HTTP2ClientConfiguration(
        host: "127.0.0.1",
        port: server.port,
        tls: HTTP2ClientTLS(
            additionalTrustRootsPEMFile: Material.tls.caCertificatePath,
            trustSystemRoots: false,
            clientCertificateChain: clientCertificate ? try Material.tls.clientCertificateChain() : [],
            clientPrivateKey: clientCertificate ? try Material.tls.clientPrivateKey() : nil
        ),
        maxConcurrentStreams: maxConcurrentStreams,
        requestTimeout: requestTimeout,
        connectTimeout: .seconds(5),
        idlePingInterval: idlePingInterval,
        pingTimeout: pingTimeout
    )
}

/// A handler that answers 200 with `x-echo-*` headers describing the request and the request body as body.
let echoHandler: HTTP2ServerHandler = { request, context, responder in
    var headers = [
        HTTP2Header("x-echo-method", request.method),
        HTTP2Header("x-echo-path", request.path),
        HTTP2Header("x-echo-authority", request.authority),
        HTTP2Header("x-echo-stream-count", String(context.streamCount)),
    ]
    for header in request.headers {
        headers.append(HTTP2Header("x-echo-\(header.name)", header.value))
    }
    responder.respond(HTTP2ServerResponse(status: 200, headers: headers, body: request.body))
}

/// Requests the server received but has not answered yet, for tests that answer late or never.
final class HeldRequests: Sendable {
    /// Every change wakes ``waitFor(_:)``.
    private let held = AsyncCondition<[(HTTP2ServerRequest, HTTP2ServerResponder)]>([])

    var handler: HTTP2ServerHandler {
        { request, _, responder in
            self.held.withLock { $0.append((request, responder)) }
        }
    }

    /// Requests held now.
    var count: Int { self.held.read { $0.count } }

    /// Waits until `count` requests are held (at most a minute, then the test fails).
    func waitFor(_ count: Int) async throws {
        try await waitUntil("\(count) requests held", self.held) { $0.count >= count }
    }

    /// Answers every held request with 200 and its path as body.
    func answerAll() {
        let all = self.held.withLock {
            let all = $0
            $0.removeAll()
            return all
        }
        for (request, responder) in all {
            responder.respond(HTTP2ServerResponse(status: 200, body: Array(request.path.utf8)))
        }
    }
}

/// A handler that answers each request 1 ms later from another event loop (so streams stay open) with the request
/// body, counting how many requests it holds at once, overall and during a phase the test marks.
final class ConcurrencyTracker: Sendable {
    private let state = Mutex((held: 0, maxHeld: 0, inPhase: false, maxHeldInPhase: 0))

    var handler: HTTP2ServerHandler {
        { request, _, responder in
            self.state.withLock { state in
                state.held += 1
                state.maxHeld = max(state.maxHeld, state.held)
                if state.inPhase { state.maxHeldInPhase = max(state.maxHeldInPhase, state.held) }
            }
            MultiThreadedEventLoopGroup.singleton.next().scheduleTask(in: .milliseconds(1)) {
                self.state.withLock { $0.held -= 1 }
                responder.respond(HTTP2ServerResponse(status: 200, body: request.body))
            }
        }
    }

    /// The most requests held at once.
    var maxHeld: Int { self.state.withLock { $0.maxHeld } }
    /// The most requests held at once while the phase was on.
    var maxHeldInPhase: Int { self.state.withLock { $0.maxHeldInPhase } }

    /// Starts or ends the measured phase.
    func setPhase(_ on: Bool) {
        self.state.withLock { $0.inPhase = on }
    }
}

/// The HTTP2Error a failing call threw, or nil when it succeeded or threw something else.
func http2Error<T>(_ body: () async throws -> T) async -> HTTP2Error? {
    do {
        _ = try await body()
        return nil
    } catch let error as HTTP2Error {
        return error
    } catch {
        return nil
    }
}
