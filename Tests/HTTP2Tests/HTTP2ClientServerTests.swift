import HTTP2
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport
import TestWaiting
import Testing

@Suite("HTTP/2 client against the HTTP/2 server over TLS on 127.0.0.1", .timeLimit(.minutes(1)))
struct HTTP2ClientServerTests {
    @Test func roundTripCarriesMethodPathHeadersAndBody() async throws {
        let server = try await startServer(handler: echoHandler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let body = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        let response = try await connection.send(
            HTTP2Request(
                method: "POST",
                path: "/3/device/abcdef",
                authority: "api.example.test",
                headers: [
                    HTTP2Header("apns-topic", "com.example.app"),
                    HTTP2Header("authorization", "bearer token", indexing: .never),
                ],
                body: body
            )
        )
        #expect(response.status == 200)
        #expect(response.headers.first("x-echo-method") == "POST")
        #expect(response.headers.first("x-echo-path") == "/3/device/abcdef")
        #expect(response.headers.first("x-echo-authority") == "api.example.test")
        #expect(response.headers.first("x-echo-apns-topic") == "com.example.app")
        #expect(response.headers.first("x-echo-authorization") == "bearer token")
        #expect(response.body == body)
        await connection.close()
        await server.shutdown()
    }

    @Test("nameOnce indexes a field on a connection's first request and sends it never-indexed after")
    func nameOnceIndexing() async throws {
        // The server reports how each field arrived: `never` for a never-indexed literal.
        let server = try await startServer { request, _, responder in
            let headers = request.headers.map {
                HTTP2Header("x-indexing-\($0.name)", $0.indexing == .never ? "never" : "incremental")
            }
            responder.respond(HTTP2ServerResponse(status: 200, headers: headers))
        }
        var seen: [[String]] = []
        for _ in 0..<2 {
            let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
            for index in 0..<3 {
                let response = try await connection.send(
                    HTTP2Request(
                        path: "/3/device/\(index)",
                        headers: [
                            HTTP2Header("apns-collapse-id", "collapse-\(index)", indexing: .nameOnce),
                            HTTP2Header("apns-topic", "com.example.app"),
                            HTTP2Header("authorization", "bearer token", indexing: .never),
                        ]
                    )
                )
                seen.append(
                    ["apns-collapse-id", "apns-topic", "authorization"].map {
                        response.headers.first("x-indexing-\($0)") ?? "absent"
                    })
            }
            await connection.close()
        }
        await server.shutdown()
        let first = ["incremental", "incremental", "never"]
        let later = ["never", "incremental", "never"]
        // Each connection has its own tables: the second starts over.
        #expect(seen == [first, later, later, first, later, later])
    }

    @Test("a header block's fields go after the header list, in order, indexed as asked, sharing nameOnce with it")
    func headerBlockFields() async throws {
        // The server reports every field it received, in order, with how it arrived.
        let server = try await startServer { request, _, responder in
            let fields = request.headers.map {
                "\($0.name)=\($0.value)/\($0.indexing == .never ? "never" : "incremental")"
            }
            responder.respond(HTTP2ServerResponse(status: 200, body: Array(fields.joined(separator: "\n").utf8)))
        }
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        var received: [[String]] = []
        for index in 0..<3 {
            var fields = HTTP2HeaderBlock()
            fields.append("apns-collapse-id", "collapse-\(index)", indexing: .nameOnce)
            fields.append("apns-topic", "com.example.app")
            fields.append("authorization", "bearer token-\(index)", indexing: .never)
            // The first request names apns-collapse-id in its list too: the block's field is then never indexed
            // from the start, since the connection indexed the name already.
            let headers = index == 0 ? [HTTP2Header("apns-collapse-id", "first", indexing: .nameOnce)] : []
            let response = try await connection.send(
                HTTP2Request(path: "/3/device/\(index)", headers: headers, fields: fields))
            received.append(String(decoding: response.body, as: UTF8.self).split(separator: "\n").map(String.init))
        }
        await connection.close()
        await server.shutdown()
        #expect(
            received[0] == [
                "apns-collapse-id=first/incremental", "apns-collapse-id=collapse-0/never",
                "apns-topic=com.example.app/incremental", "authorization=bearer token-0/never",
            ])
        #expect(
            received[2] == [
                "apns-collapse-id=collapse-2/never", "apns-topic=com.example.app/incremental",
                "authorization=bearer token-2/never",
            ])
        var block = HTTP2HeaderBlock()
        block.append("apns-id", "0f6b1c1e", indexing: .nameOnce)
        #expect(block.headers == [HTTP2Header("apns-id", "0f6b1c1e", indexing: .nameOnce)])
    }

    @Test("keptResponseHeaders keeps only the named response fields")
    func keptResponseHeadersAndStatusDigits() async throws {
        let server = try await startServer(handler: echoHandler)
        var configuration = try clientConfiguration(server)
        configuration.keptResponseHeaders = ["x-echo-path", "x-absent"]
        let connection = try await HTTP2ClientConnection.connect(configuration: configuration)
        let response = try await connection.send(HTTP2Request(path: "/kept", headers: [HTTP2Header("x-a", "b")]))
        #expect(response.status == 200)
        #expect(response.headers.map(\.name) == ["x-echo-path"])
        #expect(response.headers.first("x-echo-path") == "/kept")
        await connection.close()
        await server.shutdown()
    }

    @Test func manyConcurrentRequestsAllComplete() async throws {
        let server = try await startServer(handler: echoHandler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let count = 2000
        let matched = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<count {
                group.addTask {
                    let response = try await connection.send(
                        HTTP2Request(path: "/item/\(index)", body: Array("body-\(index)".utf8))
                    )
                    return response.status == 200 && response.body == Array("body-\(index)".utf8)
                        && response.headers.first("x-echo-path") == "/item/\(index)"
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(matched == count)
        #expect(connection.state.activeStreams == 0)
        #expect(server.statistics.requestsReceived == count)
        await connection.close()
        await server.shutdown()
    }

    @Test func streamLimitDropsToOneAndBackWithoutTheClientExceedingIt() async throws {
        // The server counts requests it holds (received, not yet answered); while the limit is 1 it must never
        // hold more than one. Answers come from another event loop after 1 ms so that streams stay open.
        let tracker = ConcurrencyTracker()
        let server = try await startServer(maxConcurrentStreams: 50, handler: tracker.handler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let count = 1500
        let completed = try await withThrowingTaskGroup(of: Bool.self) { group in
            // A sliding window of 60 requests (more than the 50 streams allowed at first), refilled as this
            // loop takes results: the traffic cannot run ahead of the loop that changes the limit and opens
            // the measured phase, however late a loaded machine schedules it.
            var sent = 0
            func sendNext() {
                let index = sent
                sent += 1
                group.addTask {
                    let response = try await connection.send(HTTP2Request(path: "/", body: Array("\(index)".utf8)))
                    return response.body == Array("\(index)".utf8)
                }
            }
            for _ in 0..<60 { sendNext() }
            var completed = 0
            var lowPhaseSeen = false
            for try await ok in group {
                if ok { completed += 1 }
                let state = connection.state
                #expect(state.activeStreams <= max(state.maxConcurrentStreams, 50))
                if completed == 300 { server.setMaxConcurrentStreams(1) }
                // The low phase lasts until 1000 completions: hundreds of requests go through it one at a time.
                if !lowPhaseSeen, completed < 1000, state.maxConcurrentStreams == 1, state.activeStreams <= 1 {
                    // The client has applied the limit and its older streams are gone.
                    lowPhaseSeen = true
                    tracker.setPhase(true)
                }
                if completed == 1000 {
                    tracker.setPhase(false)
                    server.setMaxConcurrentStreams(100)
                }
                if sent < count { sendNext() }
            }
            #expect(lowPhaseSeen)
            return completed
        }
        #expect(completed == count)
        #expect(tracker.maxHeldInPhase == 1)
        #expect(connection.state.maxConcurrentStreams == 100)
        #expect(server.statistics.protocolErrorGoAways == 0)
        #expect(server.statistics.maxConcurrentStreamsSeen <= 100)
        await connection.close()
        await server.shutdown()
    }

    @Test func localStreamCapQueuesRequestsBeyondIt() async throws {
        let tracker = ConcurrencyTracker()
        let server = try await startServer(handler: tracker.handler)
        // 200 requests queue behind three streams, and each one's timeout runs while it waits: 10 s ran out once for
        // the last ones on a loaded host (make test-stress). The timeout only says nothing hung.
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, maxConcurrentStreams: 3, requestTimeout: .seconds(60))
        )
        #expect(connection.state.maxConcurrentStreams == 3)
        let completed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    try await connection.send(HTTP2Request(path: "/", body: [UInt8(index % 256)])).body
                        == [UInt8(index % 256)]
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(completed == 200)
        #expect(tracker.maxHeld == 3)
        await connection.close()
        await server.shutdown()
    }

    @Test func cancellingTheSendingTaskResetsTheStream() async throws {
        let held = HeldRequests()
        let server = try await startServer(handler: held.handler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let sending = Task { await http2Error { try await connection.send(HTTP2Request(path: "/cancel-me")) } }
        try await held.waitFor(1)
        #expect(connection.state.activeStreams == 1)
        sending.cancel()
        #expect(await sending.value?.code == .cancelled)
        #expect(try await eventually { connection.state.activeStreams == 0 })
        #expect(connection.isAcceptingRequests)
        await connection.close()
        await server.shutdown()
    }

    @Test func goAwayEveryNStreamsLosesNothingWhenNotProcessedRequestsAreResent() async throws {
        let deliveries = Mutex([Int: Int]())
        let server = try await startServer(goAwayAfterStreams: 150) { request, _, responder in
            let id = Int(request.headers.first("x-request-id") ?? "") ?? -1
            deliveries.withLock { $0[id, default: 0] += 1 }
            responder.respond(HTTP2ServerResponse(status: 200))
        }
        let pool = TestPool(configuration: try clientConfiguration(server))
        let count = 3000
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                if index >= 200 { try await group.next() }
                group.addTask {
                    let request = HTTP2Request(path: "/", headers: [HTTP2Header("x-request-id", String(index))])
                    while true {
                        let connection = try await pool.connection()
                        do {
                            let response = try await connection.send(request)
                            #expect(response.status == 200)
                            return
                        } catch let error as HTTP2Error where error.code == .notProcessed {
                            await pool.noteResend()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let counts = deliveries.withLock { $0 }
        #expect(counts.count == count)
        #expect(counts.values.allSatisfy { $0 == 1 })
        #expect(server.statistics.connectionsAccepted >= count / 150)
        #expect(await pool.resends > 0)
        await pool.closeAll()
        await server.shutdown()
    }

    @Test func goAwayFailsStreamsAboveTheLastStreamIDAsNotProcessedWithTheReason() async throws {
        let held = HeldRequests()
        let server = try await startServer(handler: held.handler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let results = Task {
            await withTaskGroup(of: (Int, HTTP2Error?).self) { group in
                for index in 0..<4 {
                    group.addTask {
                        (index, await http2Error { try await connection.send(HTTP2Request(path: "/\(index)")) })
                    }
                }
                return await group.reduce(into: [(Int, HTTP2Error?)]()) { $0.append($1) }
            }
        }
        try await held.waitFor(4)
        // Streams 1 and 3 are processed; 5 and 7 are not.
        server.sendGoAway(lastStreamID: 3, errorCode: .noError, debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
        #expect(try await eventually { !connection.isAcceptingRequests })
        held.answerAll()
        let outcomes = await results.value
        let notProcessed = outcomes.compactMap { $0.1 }.filter { $0.code == .notProcessed }
        #expect(outcomes.filter { $0.1 == nil }.count == 2)
        #expect(notProcessed.count == 2)
        #expect(notProcessed.allSatisfy { $0.goAway?.debugText == #"{"reason":"Shutdown"}"# })
        #expect(await http2Error { try await connection.send(HTTP2Request(path: "/late")) }?.code == .notProcessed)
        let reason = await connection.waitUntilClosed()
        #expect(
            reason
                == .goAway(
                    HTTP2GoAway(lastStreamID: 3, errorCode: .noError, debugData: Array(#"{"reason":"Shutdown"}"#.utf8)))
        )
        await server.shutdown()
    }

    @Test func droppedConnectionFailsUnansweredRequestsAsConnectionLost() async throws {
        let held = HeldRequests()
        let server = try await startServer(handler: held.handler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let failures = Task {
            await withTaskGroup(of: HTTP2Error?.self) { group in
                for index in 0..<10 {
                    group.addTask { await http2Error { try await connection.send(HTTP2Request(path: "/\(index)")) } }
                }
                return await group.reduce(into: [HTTP2Error?]()) { $0.append($1) }
            }
        }
        try await held.waitFor(10)
        server.dropConnections()
        let errors = await failures.value
        #expect(errors.count == 10)
        #expect(errors.allSatisfy { $0?.code == .connectionLost })
        if case .connectionLost = await connection.waitUntilClosed() {
        } else {
            Issue.record("the close reason is not connectionLost")
        }
        #expect(!connection.isAcceptingRequests)
        await server.shutdown()
    }

    @Test func requestTimeoutFailsTheRequestAndResetsItsStream() async throws {
        let server = try await startServer { request, context, responder in
            if request.path != "/silent" { echoHandler(request, context, responder) }
        }
        let connection = try await HTTP2ClientConnection.connect(
            // One second: short enough for the test, long enough for the request after it on a loaded machine.
            configuration: try clientConfiguration(server, requestTimeout: .seconds(1))
        )
        let started = ContinuousClock.now
        let error = await http2Error { try await connection.send(HTTP2Request(path: "/silent")) }
        #expect(error?.code == .timeout)
        // Tells the 1 s timeout from a hang; loaded CI hosts add seconds.
        #expect(ContinuousClock.now - started < .seconds(15))
        #expect(try await eventually { connection.state.activeStreams == 0 })
        #expect(try await connection.send(HTTP2Request(path: "/after")).status == 200)
        await connection.close()
        await server.shutdown()
    }

    @Test func responseWithoutStatusIsAMalformedResponseError() async throws {
        let server = try await startServer { request, context, responder in
            if request.path == "/no-status" {
                responder.respond(HTTP2ServerResponse(status: nil, headers: [HTTP2Header("x-a", "b")]))
            } else {
                echoHandler(request, context, responder)
            }
        }
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let error = await http2Error { try await connection.send(HTTP2Request(path: "/no-status")) }
        #expect(error?.code == .malformedResponse)
        #expect(try await connection.send(HTTP2Request(path: "/after")).status == 200)
        await connection.close()
        await server.shutdown()
    }

    @Test func responseBodyThatIsNotJSONIsPassedAsBytes() async throws {
        let garbage: [UInt8] = [0xff, 0x00, UInt8(ascii: "{"), 0xfe, UInt8(ascii: "\"")]
        let server = try await startServer { _, _, responder in
            responder.respond(
                HTTP2ServerResponse(
                    status: 400, headers: [HTTP2Header("content-type", "application/json")], body: garbage))
        }
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let response = try await connection.send(HTTP2Request(path: "/"))
        #expect(response.status == 400)
        #expect(response.body == garbage)
        await connection.close()
        await server.shutdown()
    }

    @Test func serverCertificateFromAnUntrustedCAIsRefused() async throws {
        let server = try await startServer(tls: Material.otherTLS, handler: echoHandler)
        let error = await http2Error {
            try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        }
        #expect(error?.code == .connectFailed)
        #expect(server.statistics.requestsReceived == 0)
        await server.shutdown()
    }

    @Test func connectingToAClosedPortFailsAsConnectFailed() async throws {
        let server = try await startServer(handler: echoHandler)
        let configuration = try clientConfiguration(server)
        await server.shutdown()
        let error = await http2Error { try await HTTP2ClientConnection.connect(configuration: configuration) }
        #expect(error?.code == .connectFailed)
        #expect(error?.message.contains("127.0.0.1") == true)
    }

    @Test func mutualTLSPresentsTheClientCertificateToTheHandler() async throws {
        let peer = Mutex<[UInt8]?>(nil)
        let server = try await startServer(requireClientCertificate: true) { request, context, responder in
            peer.withLock { $0 = try? context.peerCertificate?.toDERBytes() }
            echoHandler(request, context, responder)
        }
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, clientCertificate: true)
        )
        #expect(try await connection.send(HTTP2Request(path: "/")).status == 200)
        let expected = try Material.tls.clientCertificateChain()[0].toDERBytes()
        #expect(peer.withLock { $0 } == expected)
        await connection.close()
        await server.shutdown()
    }

    @Test func mutualTLSServerRefusesAClientWithoutCertificate() async throws {
        let server = try await startServer(requireClientCertificate: true, handler: echoHandler)
        let error = await http2Error {
            let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
            return try await connection.send(HTTP2Request(path: "/"))
        }
        #expect(error != nil)
        #expect(server.statistics.requestsReceived == 0)
        await server.shutdown()
    }

    @Test func idlePingIsSentAndAcknowledged() async throws {
        let server = try await startServer(handler: echoHandler)
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(server, idlePingInterval: .milliseconds(200))
        )
        #expect(try await eventually { connection.state.pingsAcknowledged >= 2 })
        #expect(server.statistics.pingsReceived >= 2)
        #expect(connection.isAcceptingRequests)
        await connection.close()
        await server.shutdown()
    }

    @Test func unansweredPingClosesTheConnectionAndFailsOpenRequests() async throws {
        let held = HeldRequests()
        let server = try await startServer(acknowledgesPings: false, handler: held.handler)
        let connection = try await HTTP2ClientConnection.connect(
            configuration: try clientConfiguration(
                // The idle PING must come after the request reached the server, even on a loaded machine.
                server, idlePingInterval: .seconds(1), pingTimeout: .milliseconds(500)
            )
        )
        let open = Task { await http2Error { try await connection.send(HTTP2Request(path: "/never")) } }
        #expect(await connection.waitUntilClosed() == .pingTimeout)
        let code = await open.value?.code
        if held.count == 1 {
            // The usual case: the request was on the wire when the PING went unanswered.
            #expect(code == .connectionLost)
        } else {
            // On a very loaded machine the PING may time out before the request left (or before the task even
            // sent it): then it was not processed, or the connection was already closed, and either lets a
            // caller send it again elsewhere.
            #expect([.notProcessed, .connectionLost, .closed].contains(code), "\(String(describing: code))")
        }
        #expect(server.statistics.pingsReceived >= 1)
        #expect(connection.state.pingsAcknowledged == 0)
        await server.shutdown()
    }

    @Test func closeFailsLaterRequestsAsClosedAndReportsClosedLocally() async throws {
        let server = try await startServer(handler: echoHandler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        #expect(try await connection.send(HTTP2Request(path: "/")).status == 200)
        await connection.close()
        #expect(await connection.waitUntilClosed() == .closedLocally)
        #expect(
            await http2Error { try await connection.send(HTTP2Request(path: "/")) }?.isRetryableOnNewConnection == true)
        await server.shutdown()
    }

    @Test func uppercaseHeaderNameIsAnInvalidRequest() async throws {
        let server = try await startServer(handler: echoHandler)
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        let error = await http2Error {
            try await connection.send(HTTP2Request(path: "/", headers: [HTTP2Header("Apns-Topic", "x")]))
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("Apns-Topic") == true)
        await connection.close()
        await server.shutdown()
    }
}

/// The smallest pool that re-sends "not processed" requests on a new connection (the real pool is the APNs
/// client's): one current connection, replaced once it stops accepting requests.
actor TestPool {
    private let configuration: HTTP2ClientConfiguration
    private var current: Task<HTTP2ClientConnection, any Error>?
    private var generation = 0
    private var opened: [Task<HTTP2ClientConnection, any Error>] = []
    /// Requests re-sent after `notProcessed`.
    private(set) var resends = 0

    init(configuration: HTTP2ClientConfiguration) {
        self.configuration = configuration
    }

    func connection() async throws -> HTTP2ClientConnection {
        while true {
            let generation = self.generation
            if let current = self.current {
                let connection = try await current.value
                if connection.isAcceptingRequests { return connection }
                // Another caller may have replaced it while this one waited.
                if generation != self.generation { continue }
            }
            self.generation += 1
            let configuration = self.configuration
            let task = Task { try await HTTP2ClientConnection.connect(configuration: configuration) }
            self.current = task
            self.opened.append(task)
        }
    }

    func noteResend() {
        self.resends += 1
    }

    func closeAll() async {
        for task in self.opened {
            await (try? task.value)?.close()
        }
    }
}
