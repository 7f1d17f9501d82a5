import Dispatch
import Foundation
import HTTP2
import TestSupport
import TestWaiting
import Testing

/// The connect timeout bounds the setup only: a connection that was up in time stays up, however late the task that
/// asked for it runs again (a busy host's cooperative pool).
@Suite struct HTTP2ConnectDeadlineTests {
    @Test("a connection set up in time is not closed by the connect timeout when the caller resumes after it")
    func lateResumptionKeepsTheConnection() async throws {
        let server = try await startServer(handler: echoHandler)
        let gate = GateExecutor()
        // Once the server accepted the TCP connection, the connecting task waits for TLS and SETTINGS; the gate then
        // holds its resumption until the connect timeout (3 s) has long passed.
        let blocker = Thread {
            let deadline = Date().addingTimeInterval(30)
            while server.statistics.connectionsAccepted == 0, Date() < deadline { usleep(200) }
            gate.hold(seconds: 4)
        }
        blocker.start()
        let connection = try await withTaskExecutorPreference(gate) {
            try await HTTP2ClientConnection.connect(
                configuration: try clientConfiguration(server).withConnectTimeout(.seconds(3)))
        }
        #expect(gate.held, "the gate held the connecting task: otherwise this proves nothing")
        #expect(connection.isAcceptingRequests)
        let response = try await connection.send(HTTP2Request(path: "/after"))
        #expect(response.status == 200)
        await connection.close()
        await server.shutdown()
    }

    @Test("a peer that never answers the TLS hello fails at the connect timeout, and the connection is closed")
    func silentPeerTimesOut() async throws {
        let peer = try await HostileProxy.start(behaviour: .silent)
        // The configuration (trust roots and all) of a real server, pointed at the silent peer instead.
        let server = try await startServer(handler: echoHandler)
        var configuration = try clientConfiguration(server)
        await server.shutdown()
        configuration.port = peer.port
        configuration.connectTimeout = .seconds(1)
        let started = ContinuousClock.now
        var failure: HTTP2Error?
        do {
            _ = try await HTTP2ClientConnection.connect(configuration: configuration)
        } catch let error as HTTP2Error {
            failure = error
        }
        let elapsed = ContinuousClock.now - started
        #expect(failure?.code == .connectFailed)
        #expect("\(failure.map { "\($0)" } ?? "")".contains("no TLS handshake and SETTINGS within the connect timeout"))
        // The deadline never fires early; 20 s only says the connect did not wait for something else.
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(20))
        #expect(try await eventually { peer.connectionsClosed == 1 })
        await peer.shutdown()
    }
}

/// A serial executor for one task that the test can stop for a while.
private final class GateExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "gate")
    private let heldFlag = NSLock()
    private var wasHeld = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Queues a pause of `seconds`: jobs enqueued from now on run after it.
    func hold(seconds: Double) {
        self.queue.async {
            self.heldFlag.withLock { self.wasHeld = true }
            Thread.sleep(forTimeInterval: seconds)
        }
    }

    var held: Bool { self.heldFlag.withLock { self.wasHeld } }
}

extension HTTP2ClientConfiguration {
    fileprivate func withConnectTimeout(_ timeout: Duration) -> HTTP2ClientConfiguration {
        var copy = self
        copy.connectTimeout = timeout
        return copy
    }
}
