import HTTP2
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport
import Testing

/// The client against servers that break the rules on purpose (raw frames from `HostileHTTP2Server`): header
/// blocks that would take unbounded memory fail their stream or connection with a clear error, and nothing
/// the server says can make the client keep more than the documented bounds.
@Suite(.timeLimit(.minutes(1)))
struct HostileServerTests {
    /// A client configuration for `server`, trusting the test CA.
    func configuration(_ server: HostileHTTP2Server) -> HTTP2ClientConfiguration {
        HTTP2ClientConfiguration(
            host: "127.0.0.1", port: server.port,
            tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: Material.tls.caCertificatePath, trustSystemRoots: false),
            requestTimeout: .seconds(20), connectTimeout: .seconds(10)
        )
    }

    /// Stream 1 gets `hostile`; every later stream a plain 200 with body "ok".
    func firstStreamHostile(_ hostile: @escaping @Sendable (UInt32) -> [UInt8]) -> HostileHTTP2Server.Behaviour {
        .answer { stream in
            if stream == 1 { return hostile(stream) }
            return HTTP2Frames.headers(stream: stream, block: HTTP2Frames.indexed(8), endStream: false)
                + HTTP2Frames.data(stream: stream, Array("ok".utf8), endStream: true)
        }
    }

    let request = HTTP2Request(method: "POST", path: "/3/device/abc", body: Array("{}".utf8))

    @Test func tenThousandHeaderFieldsFailTheStreamAndTheConnectionServesOn() async throws {
        let server = try await HostileHTTP2Server.start(
            tls: Material.tls,
            behaviour: self.firstStreamHostile { stream in
                var block = HTTP2Frames.indexed(8)
                for index in 0..<10_000 {
                    block += HTTP2Frames.literal("x-\(index % 10)", "v")
                }
                return HTTP2Frames.headers(stream: stream, block: block, endStream: true)
            })
        let connection = try await HTTP2ClientConnection.connect(configuration: self.configuration(server))
        let error = await http2Error { try await connection.send(self.request) }
        #expect(error?.code == .malformedResponse)
        #expect(error?.message == "the response has more than 100 header fields")
        let next = try await connection.send(self.request)
        #expect(next.status == 200)
        #expect(next.body == Array("ok".utf8))
        await connection.close()
        await server.shutdown()
    }

    @Test func hpackReferencesDecodingToMegabytesFailTheStream() async throws {
        // 4000 bytes into the dynamic table once, then 3000 one-byte references to it: 3 KB on the wire that
        // decode to 12 MB of header fields.
        let server = try await HostileHTTP2Server.start(
            tls: Material.tls,
            behaviour: self.firstStreamHostile { stream in
                var block = HTTP2Frames.indexed(8)
                block += HTTP2Frames.literalIndexed("x-big", String(repeating: "a", count: 4000))
                block += Array(repeating: HTTP2Frames.indexed(62)[0], count: 3000)
                return HTTP2Frames.headers(stream: stream, block: block, endStream: true)
            })
        let connection = try await HTTP2ClientConnection.connect(configuration: self.configuration(server))
        let error = await http2Error { try await connection.send(self.request) }
        #expect(error?.code == .malformedResponse)
        #expect(error?.message == "the response headers exceed 16384 bytes")
        #expect(try await connection.send(self.request).status == 200)
        await connection.close()
        await server.shutdown()
    }

    @Test func oneMegabyteHeaderFailsCleanly() async throws {
        let server = try await HostileHTTP2Server.start(
            tls: Material.tls,
            behaviour: .answer { stream in
                let block =
                    HTTP2Frames.indexed(8) + HTTP2Frames.literal("x-huge", String(repeating: "b", count: 1 << 20))
                return HTTP2Frames.headers(stream: stream, block: block, endStream: true)
            })
        let connection = try await HTTP2ClientConnection.connect(configuration: self.configuration(server))
        let error = await http2Error { try await connection.send(self.request) }
        // nghttp2 refuses a field this large (or this many CONTINUATION frames) as a connection error; either
        // way the request fails with a reason, and the connection is closed rather than grown.
        let code = try #require(error?.code)
        #expect([.connectionLost, .malformedResponse].contains(code), "\(String(describing: error))")
        #expect(await connection.waitUntilClosed() != .closedLocally)
        await server.shutdown()
    }

    @Test("a :status that is not three digits is a malformed response", arguments: ["2000", "20", "2x0", "+20", ""])
    func statusNotThreeDigits(status: String) async throws {
        let server = try await HostileHTTP2Server.start(
            tls: Material.tls,
            behaviour: .answer { stream in
                HTTP2Frames.headers(stream: stream, block: HTTP2Frames.status(text: status), endStream: true)
            })
        let connection = try await HTTP2ClientConnection.connect(configuration: self.configuration(server))
        #expect(await http2Error { try await connection.send(self.request) }?.code == .malformedResponse)
        await connection.close()
        await server.shutdown()
    }

    @Test func configuredHeaderBoundsApply() async throws {
        let server = try await HostileHTTP2Server.start(
            tls: Material.tls,
            behaviour: .answer { stream in
                var block = HTTP2Frames.indexed(8)
                for index in 0..<6 { block += HTTP2Frames.literal("x-\(index)", "v") }
                return HTTP2Frames.headers(stream: stream, block: block, endStream: true)
            })
        var configuration = self.configuration(server)
        configuration.maxResponseHeaderFields = 7
        let connection = try await HTTP2ClientConnection.connect(configuration: configuration)
        let response = try await connection.send(self.request)
        #expect(response.headers.count == 6, "7 fields with :status are within a bound of 7")
        await connection.close()
        configuration.maxResponseHeaderFields = 6
        let strict = try await HTTP2ClientConnection.connect(configuration: configuration)
        #expect(await http2Error { try await strict.send(self.request) }?.code == .malformedResponse)
        await strict.close()
        await server.shutdown()
    }

    @Test func goAwayDebugDataIsBoundedAndEscapedForLogs() {
        let goAway = HTTP2GoAway(
            lastStreamID: 0, errorCode: .noError,
            debugData: Array("line\r\nfake: log\u{1B}[31m".utf8)
                + Array(
                    repeating: UInt8(ascii: "x"), count: 16_000))
        let text = goAway.debugText
        #expect(text.hasPrefix("line\\u{d}\\u{a}fake: log\\u{1b}[31m"))
        #expect(text.hasSuffix("…"))
        #expect(text.utf8.count < 300)
    }

    @Test func serverResetsRequestsOverItsHeaderAndBodyBoundsWithoutHandlingThem() async throws {
        let handled = Mutex(0)
        let server = try await startServer { request, _, responder in
            handled.withLock { $0 += 1 }
            responder.respond(HTTP2ServerResponse(status: 200, body: Array("\(request.body.count)".utf8)))
        }
        let connection = try await HTTP2ClientConnection.connect(configuration: try clientConfiguration(server))
        var manyHeaders = HTTP2Request(method: "POST", path: "/many")
        manyHeaders.headers = (0..<150).map { HTTP2Header("x-\($0)", "v") }
        #expect(await http2Error { try await connection.send(manyHeaders) }?.code == .malformedResponse)
        let bigBody = HTTP2Request(method: "POST", path: "/big", body: Array(repeating: 0x61, count: 100_000))
        #expect(await http2Error { try await connection.send(bigBody) }?.code == .malformedResponse)
        let atTheBound = HTTP2Request(method: "POST", path: "/ok", body: Array(repeating: 0x61, count: 64 * 1024))
        let answer = try await connection.send(atTheBound)
        #expect(answer.body == Array("65536".utf8), "a body of exactly the bound is handled")
        #expect(server.statistics.requestsOverLimits == 2)
        #expect(handled.withLock { $0 } == 1)
        await connection.close()
        await server.shutdown()
    }
}
