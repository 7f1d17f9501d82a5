import APNSCore
import Crypto
import Foundation
import Testing

@testable import APNSSimulator

/// Keys created and revoked while the simulator runs, as at Apple during a key rotation (docs/simulator.md).
extension SimulatorEngineTests {
    private func status(_ engine: SimulatorEngine, _ authorization: String, connection: Int) -> String {
        let answer = self.answer(engine.handle(self.request(authorization: authorization, connection: connection)))
        return "\(answer?.status ?? 0) \(answer?.reason?.rawValue ?? "-")"
    }

    @Test("a key trusted while running is accepted; a revoked key is refused, also on a connection that used it")
    func trustAndRevoke() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let newKey = P256.Signing.PrivateKey()
        let newToken = self.token(keyID: "NEWKEY0002", key: newKey)
        #expect(self.status(engine, newToken, connection: 2) == "403 InvalidProviderToken")

        engine.trust(.init(keyID: "NEWKEY0002", teamID: Fixtures.teamID, publicKey: newKey.publicKey))
        #expect(self.status(engine, newToken, connection: 3) == "200 -")
        let oldToken = self.token()
        #expect(self.status(engine, oldToken, connection: 1) == "200 -")

        engine.revoke(keyID: Fixtures.keyID)
        #expect(self.status(engine, oldToken, connection: 1) == "403 InvalidProviderToken")
        #expect(self.status(engine, oldToken, connection: 4) == "403 InvalidProviderToken")
        #expect(self.status(engine, newToken, connection: 3) == "200 -")
    }
}
