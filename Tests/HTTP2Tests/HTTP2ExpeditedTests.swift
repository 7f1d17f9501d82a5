import HTTP2
import Synchronization
import TestWaiting
import Testing
import Waiting

/// Expedited requests (``HTTP2Request/expedited``, a lane with `expedite: true`): ahead of the others that wait for
/// a stream.
@Suite struct HTTP2ExpeditedTests {
    @Test func expeditedRequestsOpenStreamsBeforeOthersQueuedForTheStreamLimit() async throws {
        // The server records the order requests arrive in, and holds the first until the test lets it go: with one
        // stream, everything sent meanwhile queues in the client.
        let arrivals = Mutex<[String]>([])
        let first = AsyncCondition<HTTP2ServerResponder?>(nil)
        let server = try await startServer { request, _, responder in
            arrivals.withLock { $0.append(request.path) }
            if request.path == "/first" {
                first.withLock { $0 = responder }
            } else {
                responder.respond(HTTP2ServerResponse(status: 200))
            }
        }
        // No request may time out while the test waits on a loaded host: the one stream stays held meanwhile.
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, maxConcurrentStreams: 1, requestTimeout: .seconds(600)))
        let failures = Mutex<[String]>([])
        let done = Mutex(0)
        let all = AsyncStream<Void>.makeStream()
        let complete: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void = { result in
            if case .failure(let error) = result { failures.withLock { $0.append("\(error)") } }
            if done.withLock({ count in
                count += 1
                return count
            }) == 6 {
                all.continuation.finish()
            }
        }
        connection.send(contentsOf: [
            HTTP2ClientConnection.Submission(request: HTTP2Request(path: "/first"), completion: complete)
        ])
        try await waitUntil("the first request held", first) { $0 != nil }
        let paths = ["/n0", "/n1", "/e0", "/n2", "/e1"]
        connection.send(
            contentsOf: paths.map { path in
                HTTP2ClientConnection.Submission(
                    request: HTTP2Request(path: path, expedited: path.hasPrefix("/e")), completion: complete)
            })
        guard try await eventually(timeout: .seconds(60), { connection.state.queuedRequests == 5 }) else {
            let state = connection.state
            let seen = (failures: failures.withLock { $0 }, arrivals: arrivals.withLock { $0 })
            Issue.record("the five did not queue: \(state), failures \(seen.failures), arrivals \(seen.arrivals)")
            return
        }
        first.read { $0 }?.respond(HTTP2ServerResponse(status: 200))
        for await _ in all.stream {}
        #expect(arrivals.withLock { $0 } == ["/first", "/e0", "/e1", "/n0", "/n1", "/n2"])
        #expect(failures.withLock { $0 }.isEmpty)
        await connection.close()
        await server.shutdown()
    }
}
