import APNSSimulator
import DoctorChecks
import TestSupport
import Testing

/// `pushbridge doctor` with `apns.proxy` (a real tinyproxy on 127.0.0.1): the checks go through the tunnel, and a
/// proxy that refuses is named in the TCP check, with the status and a fix, never with its credentials.
@Suite(
    "doctor through an HTTP proxy (tinyproxy)", .enabled(if: TinyProxy.testsRun, Comment(rawValue: TinyProxy.missing)),
    .timeLimit(.minutes(2)))
struct ProxyDoctorTests {
    /// Doctor's checks with `apns.proxy` at a tinyproxy that takes `doctor` / `pr0xy-s3cret`, the URL carrying
    /// `password`; with the proxy's port and its log.
    func doctor(_ setup: DoctorSetup, proxyPassword password: String) async throws -> (
        checks: [DoctorCheck], port: Int, log: String
    ) {
        let proxy = try await TinyProxy.start(
            connectPorts: [setup.simulator.port], credentials: ("doctor", "pr0xy-s3cret"))
        defer { proxy.stop() }
        let path = try setup.configuration(apns: "  proxy: \(proxy.url(user: "doctor", password: password))")
        return (try await setup.doctor(path), proxy.port, proxy.log)
    }

    @Test("through a proxy that takes the credentials every check passes, and the TCP check names the proxy")
    func throughTheProxy() async throws {
        try await withDoctorSetup { setup in
            let (checks, port, log) = try await self.doctor(setup, proxyPassword: "pr0xy-s3cret")
            #expect(checks.allSatisfy { $0.status == .ok }, "\(checks.map(\.description))")
            let tcp = checks.named("apns tcp")?.found ?? ""
            #expect(tcp.contains("connects through the proxy http://****@127.0.0.1:\(port)"), "\(tcp)")
            #expect(!checks.map(\.description).joined().contains("pr0xy-s3cret"))
            #expect(log.contains("CONNECT 127.0.0.1:\(setup.simulator.port)"))
        }
    }

    @Test(
        "a proxy that refuses the credentials fails the TCP check with the proxy, its status and a fix; TLS is not tried"
    )
    func refusedCredentials() async throws {
        try await withDoctorSetup { setup in
            let (checks, port, _) = try await self.doctor(setup, proxyPassword: "wrong-s3cret")
            let tcp = try #require(checks.named("apns tcp"))
            #expect(tcp.status == .fail)
            #expect(tcp.found.contains("through the proxy http://****@127.0.0.1:\(port)"), "\(tcp)")
            #expect(
                tcp.found.contains("the proxy refused the credentials (401 Unauthorized)"), "\(tcp)")
            #expect(tcp.hint?.contains("user and password") == true)
            #expect(checks.named("apns tls")?.status == .warn)
            #expect(!checks.map(\.description).joined().contains("wrong-s3cret"))
            #expect(setup.simulator.statistics.requestsReceived == 0)
        }
    }

    @Test("a proxy whose rules refuse the port fails with 403 and says which port to allow")
    func forbiddenPort() async throws {
        try await withDoctorSetup { setup in
            let proxy = try await TinyProxy.start(connectPorts: [443])
            defer { proxy.stop() }
            let checks = try await setup.doctor(try setup.configuration(apns: "  proxy: \(proxy.url())"))
            let tcp = try #require(checks.named("apns tcp"))
            #expect(tcp.status == .fail)
            #expect(tcp.found.contains("403"), "\(tcp)")
            #expect(tcp.hint?.contains("allow CONNECT to port \(setup.simulator.port)") == true, "\(tcp)")
        }
    }
}
