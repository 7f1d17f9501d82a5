import APNSClient
import APNSCore
import Crypto
import Foundation
import Testing

@Suite("Provider tokens")
struct ProviderTokenTests {
    let key = P256.Signing.PrivateKey()

    private func source(clock: ManualClock) -> ProviderTokenSource {
        ProviderTokenSource(
            key: SigningKey(keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: self.key),
            clock: clock
        )
    }

    @Test("the JWT has header {alg ES256, kid} and claims {iss, iat} with iat an integer")
    func jwtShape() throws {
        let token = try ProviderTokenJWT.sign(
            keyID: Fixtures.keyID, teamID: Fixtures.teamID, issuedAtEpochSeconds: 1_700_000_000, privateKey: self.key
        )
        let parts = token.compact.split(separator: ".")
        #expect(parts.count == 3)
        let header = String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self)
        let claims = String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self)
        #expect(header == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(claims == #"{"iss":"TEAM123456","iat":1700000000}"#)
        #expect(!token.compact.contains("="))
        #expect(token.hasValidSignature(publicKey: self.key.publicKey))
        #expect(!token.hasValidSignature(publicKey: P256.Signing.PrivateKey().publicKey))
    }

    @Test("a token whose iat is a string or a fraction does not parse")
    func iatMustBeInteger() {
        func token(claims: String) -> String {
            Base64URL.encode(Array(#"{"alg":"ES256","kid":"K"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
                + ".c2ln"
        }
        #expect(ProviderTokenJWT.parse(token(claims: #"{"iss":"T","iat":1700000000}"#)) != nil)
        #expect(ProviderTokenJWT.parse(token(claims: #"{"iss":"T","iat":"1700000000"}"#)) == nil)
        #expect(ProviderTokenJWT.parse(token(claims: #"{"iss":"T","iat":1700000000.5}"#)) == nil)
    }

    @Test("the same token is handed out until it is 50 minutes old")
    func sharedUntilFiftyMinutes() throws {
        let clock = ManualClock()
        let source = self.source(clock: clock)
        let first = try source.currentToken()
        clock.advance(by: .seconds(49 * 60))
        #expect(try source.currentToken() == first)
        clock.advance(by: .seconds(60))
        let second = try source.currentToken()
        #expect(second != first)
        #expect(second.issuedAtEpochSeconds == first.issuedAtEpochSeconds + 50 * 60)
        #expect(source.tokensIssued == 2)
    }

    @Test("ExpiredProviderToken renews at once when the token is 20 minutes old or more")
    func renewOnExpiry() throws {
        let clock = ManualClock()
        let source = self.source(clock: clock)
        let first = try source.currentToken()
        clock.advance(by: .seconds(20 * 60))
        let renewed = try #require(try source.tokenAfterExpiry(of: first))
        #expect(renewed != first)
        #expect(try source.currentToken() == renewed)
    }

    @Test("ExpiredProviderToken never renews within 20 minutes of the last renewal")
    func neverMoreThanOncePerTwentyMinutes() throws {
        let clock = ManualClock()
        let source = self.source(clock: clock)
        let first = try source.currentToken()
        clock.advance(by: .seconds(19 * 60))
        #expect(try source.tokenAfterExpiry(of: first) == nil)
        #expect(try source.currentToken() == first)
        #expect(source.tokensIssued == 1)
    }

    @Test("a second ExpiredProviderToken for an already renewed token gets the new token, not a third")
    func concurrentExpiriesRenewOnce() throws {
        let clock = ManualClock()
        let source = self.source(clock: clock)
        let first = try source.currentToken()
        clock.advance(by: .seconds(25 * 60))
        let renewedByOne = try source.tokenAfterExpiry(of: first)
        let renewedByOther = try source.tokenAfterExpiry(of: first)
        #expect(renewedByOne == renewedByOther)
        #expect(source.tokensIssued == 2)
    }
}

@Suite("Credentials")
struct CredentialTests {
    @Test("a .p8 key loads; a file that is not one names the file and the fix")
    func p8() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try Fixtures.writeP8(P256.Signing.PrivateKey(), in: directory)
        let key = try SigningKey.load(p8Path: path, keyID: Fixtures.keyID, teamID: Fixtures.teamID)
        #expect(key.keyID == Fixtures.keyID)

        let garbage = (directory as NSString).appendingPathComponent("garbage.p8")
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: garbage))
        let error = #expect(throws: CredentialError.self) {
            try SigningKey.load(p8Path: garbage, keyID: Fixtures.keyID, teamID: Fixtures.teamID)
        }
        #expect(error?.code == .invalidSigningKey)
        #expect(error?.description.contains(garbage) == true)
        #expect(error?.description.contains("BEGIN PRIVATE KEY") == true)

        let missing = #expect(throws: CredentialError.self) {
            try SigningKey.load(p8Path: directory + "/none.p8", keyID: Fixtures.keyID, teamID: Fixtures.teamID)
        }
        #expect(missing?.code == .unreadable)
    }

    @Test("a key ID that is not letters and digits is refused")
    func badKeyID() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try Fixtures.writeP8(P256.Signing.PrivateKey(), in: directory)
        let error = #expect(throws: CredentialError.self) {
            try SigningKey.load(p8Path: path, keyID: "bad id!", teamID: Fixtures.teamID)
        }
        #expect(error?.code == .invalidIdentifier)
    }
}
