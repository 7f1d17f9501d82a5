import APNSCore
import Crypto
import Foundation
import Testing

@testable import APNSSimulator

/// The simulator verifies a provider token's signature once per connection and then trusts the same token string,
/// as APNs does; everything else about the token is still checked on every request.
extension SimulatorEngineTests {
    private func status(_ engine: SimulatorEngine, _ authorization: String, connection: Int = 1) -> String {
        let answer = self.answer(engine.handle(self.request(authorization: authorization, connection: connection)))
        return "\(answer?.status ?? 0) \(answer?.reason?.rawValue ?? "-")"
    }

    @Test("a token verified once is not verified again on the same connection, and once more on another")
    func verifiedTokenIsTrusted() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let token = self.token()
        for _ in 0..<5 {
            #expect(self.status(engine, token) == "200 -")
        }
        #expect(engine.statistics.providerTokenVerifications == 1)
        #expect(self.status(engine, token, connection: 2) == "200 -")
        #expect(self.status(engine, token, connection: 2) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == 2)
    }

    @Test("a changed token on the connection is verified, then trusted in turn")
    func changedTokenIsVerified() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        #expect(self.status(engine, self.token()) == "200 -")
        self.clock.advance(by: .seconds(50 * 60))
        let renewed = self.token()
        #expect(self.status(engine, renewed) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == 2)
        #expect(self.status(engine, renewed) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == 2)
        #expect(engine.statistics.providerTokenAdoptions == 2)
    }

    @Test("a token with a bad signature is verified and refused on every request")
    func forgedTokenIsRefusedEveryTime() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let forged = self.token(key: P256.Signing.PrivateKey())
        for _ in 0..<3 {
            #expect(self.status(engine, forged) == "403 InvalidProviderToken")
        }
        #expect(engine.statistics.providerTokenVerifications == 3)

        // The same header and claims as a trusted token, another signature: the cache matches whole tokens only.
        let genuine = self.token()
        #expect(self.status(engine, genuine) == "200 -")
        let lastDot = try #require(genuine.lastIndex(of: "."))
        let forgedSignature = String(genuine[...lastDot]) + String(forged.suffix(86))
        #expect(forgedSignature != genuine)
        #expect(self.status(engine, forgedSignature) == "403 InvalidProviderToken")
        #expect(self.status(engine, forgedSignature) == "403 InvalidProviderToken")
        #expect(self.status(engine, genuine) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == 6)
    }

    @Test("a trusted token that ages past its hour is ExpiredProviderToken, and is verified again if sent again")
    func trustedTokenExpires() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let token = self.token()
        #expect(self.status(engine, token) == "200 -")
        // `iat` is whole seconds, the clock is not: at 3599 s the token is under an hour old, at 3601 s over.
        self.clock.advance(by: .seconds(3599))
        #expect(self.status(engine, token) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == 1)
        self.clock.advance(by: .seconds(2))
        #expect(self.status(engine, token) == "403 ExpiredProviderToken")
        #expect(self.status(engine, token) == "403 ExpiredProviderToken")
        #expect(engine.statistics.providerTokenVerifications == 2)
    }

    @Test("each connection keeps a bounded number of verified tokens; the oldest is verified again")
    func verifiedTokensAreBounded() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let count = VerifiedProviderTokens.capacity + 1
        // Distinct `iat`s make distinct tokens; all but the first are refused as too-early renewals, after their
        // signature was verified.
        let tokens = (0..<count).map { self.token(issuedAt: self.clock.now().addingTimeInterval(Double(-$0))) }
        for token in tokens { _ = self.status(engine, token) }
        #expect(engine.statistics.providerTokenVerifications == count)
        #expect(self.status(engine, tokens[count - 1]) == "429 TooManyProviderTokenUpdates")
        #expect(engine.statistics.providerTokenVerifications == count)
        #expect(self.status(engine, tokens[0]) == "200 -")
        #expect(engine.statistics.providerTokenVerifications == count + 1)
    }

    @Test("the verification count is in the statistics JSON")
    func verificationCountInJSON() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        _ = self.status(engine, self.token())
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(engine.statistics.json.utf8)) as? [String: Any])
        #expect(object["provider_token_verifications"] as? Int == 1)
    }
}
