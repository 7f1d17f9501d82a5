import Foundation
import HTTP2
import Synchronization
import Testing

/// Where a request's completion runs: on one of the `h2-answers` threads, never on the connection's event loop (so
/// the caller's work on an answer, such as the bridge's outcome record, does not hold up the next reads and writes),
/// one at a time, and answers in the order they arrived.
@Suite struct HTTP2AnswerLoopTests {
    /// What a completion saw: the request's path (or the error), and the name of the thread it ran on.
    private struct Call: Sendable {
        var what: String
        var thread: String
    }

    /// The calling thread's name, as Linux keeps it (what `top -H` shows).
    private static func threadName() -> String {
        let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
        return name?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
    }

    /// Sends `paths` in one hand-over and returns what each completion saw, in the order they ran.
    private func send(_ paths: [String], on connection: HTTP2ClientConnection) async -> [Call] {
        let calls = Mutex<[Call]>([])
        let concurrent = Atomic(0)
        let overlapped = Atomic(false)
        let all = AsyncStream<Void>.makeStream()
        let submissions = paths.map { path in
            HTTP2ClientConnection.Submission(request: HTTP2Request(path: path)) { result in
                if concurrent.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                let what =
                    switch result {
                    case .success(let response): "\(path) \(response.status)"
                    case .failure(let error): "\(path) \(error.code)"
                    }
                let call = Call(what: what, thread: Self.threadName())
                let count = calls.withLock { calls in
                    calls.append(call)
                    return calls.count
                }
                concurrent.subtract(1, ordering: .relaxed)
                if count == paths.count { all.continuation.finish() }
            }
        }
        connection.send(contentsOf: submissions)
        for await _ in all.stream {}
        let overlapping = overlapped.load(ordering: .relaxed)
        #expect(!overlapping, "two completions of one connection ran at once")
        return calls.withLock { $0 }
    }

    @Test func answersAreCalledOnAnAnswerThreadInTheOrderTheyCame() async throws {
        let server = try await startServer { request, _, responder in
            responder.respond(HTTP2ServerResponse(status: request.path == "/r7" ? 410 : 200))
        }
        // One stream: the answers come in the order of the requests.
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, maxConcurrentStreams: 1))
        let paths = (0..<40).map { "/r\($0)" }
        let calls = await self.send(paths, on: connection)
        #expect(calls.map(\.what) == paths.map { "\($0) \($0 == "/r7" ? 410 : 200)" })
        #expect(Set(calls.map(\.thread)) == ["h2-answers"])
        await connection.close()
        await server.shutdown()
    }

    @Test func failuresTheEventLoopDecidesAreCalledThereToo() async throws {
        // The server never answers: each request ends with its timeout, decided on the event loop.
        let server = try await startServer { _, _, _ in }
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, maxConcurrentStreams: 4, requestTimeout: .milliseconds(200)))
        let calls = await self.send(["/a", "/b", "/c"], on: connection)
        #expect(Set(calls.map(\.what)) == ["/a timeout", "/b timeout", "/c timeout"])
        #expect(Set(calls.map(\.thread)) == ["h2-answers"])
        await connection.close()
        await server.shutdown()
    }
}
