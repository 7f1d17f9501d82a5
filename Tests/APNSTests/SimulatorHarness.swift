import APNSClient
import APNSCore
import APNSSimulator
import Crypto
import Foundation
import TestSupport

/// A simulator over real TLS + HTTP/2 on 127.0.0.1 and clients pointed at it.
struct SimulatorHarness {
    let tls: TestTLS
    let simulator: APNSSimulatorServer
    let key: P256.Signing.PrivateKey

    /// Starts a simulator accepting `Fixtures.topic` and one JWT key, then lets `edit` adjust the scenario.
    static func start(edit: (inout SimulatorScenario) -> Void = { _ in }) async throws -> SimulatorHarness {
        let tls = try TestTLS.generate()
        let key = P256.Signing.PrivateKey()
        var scenario = SimulatorScenario()
        scenario.topics = [Fixtures.topic]
        scenario.jwtKeys = [.init(keyID: Fixtures.keyID, teamID: Fixtures.teamID, publicKey: key.publicKey)]
        edit(&scenario)
        let simulator = try await APNSSimulatorServer.start(
            scenario: scenario,
            certificatePEMPath: tls.serverCertificatePath,
            privateKeyPEMPath: tls.serverKeyPath
        )
        return SimulatorHarness(tls: tls, simulator: simulator, key: key)
    }

    /// A token source for the harness's key.
    func tokenSource(clock: any WallClock = SystemWallClock()) -> ProviderTokenSource {
        ProviderTokenSource(
            key: SigningKey(keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: self.key),
            clock: clock
        )
    }

    /// A client for the simulator (or, with `port`, for whatever is on that port of 127.0.0.1).
    func client(
        authentication: APNSAuthentication? = nil,
        connections: Int = 2,
        requestTimeout: Duration = .seconds(10),
        maxResends: Int = 3,
        port: Int? = nil
    ) -> APNSClient {
        APNSClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: port ?? self.simulator.port),
                authentication: authentication ?? .token(self.tokenSource()),
                connectionCount: connections,
                requestTimeout: requestTimeout,
                connectTimeout: .seconds(5),
                maxResends: maxResends,
                reconnectInitialDelay: .milliseconds(10),
                reconnectMaximumDelay: .milliseconds(200),
                additionalTrustRootsPEMFile: self.tls.caCertificatePath,
                trustSystemRoots: false
            )
        ).running()
    }

    func stop() async {
        await self.simulator.shutdown()
        self.tls.remove()
    }
}

/// Sends `count` notifications with distinct tokens concurrently; returns the results by token.
func sendMany(_ client: APNSClient, count: Int) async -> [String: [APNSResult]] {
    await withTaskGroup(of: (String, APNSResult).self) { group in
        for index in 0..<count {
            group.addTask {
                let notification = Fixtures.notification(token: Fixtures.deviceToken(index))
                return (notification.deviceToken, await client.send(notification))
            }
        }
        var results: [String: [APNSResult]] = [:]
        for await (token, result) in group {
            results[token, default: []].append(result)
        }
        return results
    }
}

/// ``sendMany(_:count:)`` through ``APNSClient/send(_:completion:)``: all requests are started from one task
/// without waiting, as the bridge starts them, and the callbacks are collected.
/// With `batch` > 1, in groups through ``APNSClient/send(contentsOf:)``.
func sendManyWithCallbacks(
    _ client: APNSClient, count: Int, firstToken: Int = 0, batch: Int = 1
) async -> [String: [APNSResult]] {
    let (results, input) = AsyncStream.makeStream(of: (String, APNSResult).self)
    var group: [APNSClient.Submission] = []
    for index in firstToken..<firstToken + count {
        let notification = Fixtures.notification(token: Fixtures.deviceToken(index))
        let completion: @Sendable (APNSResult) -> Void = { input.yield((notification.deviceToken, $0)) }
        if batch <= 1 {
            client.send(notification, completion: completion)
            continue
        }
        group.append(APNSClient.Submission(notification: notification, completion: completion))
        if group.count == batch || index == firstToken + count - 1 {
            client.send(contentsOf: group)
            group.removeAll()
        }
    }
    var collected: [String: [APNSResult]] = [:]
    var received = 0
    for await (token, result) in results {
        collected[token, default: []].append(result)
        received += 1
        if received == count { break }
    }
    return collected
}

extension APNSResult {
    /// The status when APNs answered.
    var status: Int? {
        if case .answered(let response) = self { return response.status }
        return nil
    }

    /// The response when APNs answered.
    var response: APNSResponse? {
        if case .answered(let response) = self { return response }
        return nil
    }
}
