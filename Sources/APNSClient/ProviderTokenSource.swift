import APNSCore
import Crypto
import Foundation
import Synchronization

/// A `.p8` signing key with its key ID and team ID: everything token authentication needs.
///
/// `@unchecked Sendable`: swift-crypto's P-256 keys are not `Sendable` on Linux because they wrap a BoringSSL
/// key object. That object is never mutated after creation and BoringSSL signs with one key from several
/// threads safely; the other fields are strings.
package struct SigningKey: @unchecked Sendable {
    /// The 10-character key ID (`kid`).
    package var keyID: String
    /// The 10-character team ID (`iss`).
    package var teamID: String
    /// The P-256 private key.
    package var privateKey: P256.Signing.PrivateKey

    /// Creates a key from its parts.
    package init(keyID: String, teamID: String, privateKey: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.privateKey = privateKey
    }

    /// Loads a PKCS#8 PEM (`.p8`) key from `path`. Errors name the file, never its contents.
    package static func load(p8Path path: String, keyID: String, teamID: String) throws(CredentialError) -> SigningKey {
        for (name, value) in [("key ID", keyID), ("team ID", teamID)]
        where value.isEmpty || !value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            throw CredentialError(
                code: .invalidIdentifier,
                file: path,
                cause: "the \(name) must be letters and digits (Apple's are 10 characters), got '\(value)'"
            )
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CredentialError(code: .unreadable, file: path, cause: "cannot read the key file")
        }
        do {
            let privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
            return SigningKey(keyID: keyID, teamID: teamID, privateKey: privateKey)
        } catch {
            throw CredentialError(
                code: .invalidSigningKey,
                file: path,
                cause: "not a PKCS#8 PEM P-256 private key (an APNs .p8 key starts with -----BEGIN PRIVATE KEY-----)"
            )
        }
    }
}

/// The provider token shared by every connection of one client, renewed by Apple's rules.
///
/// - Renewed when it is 50 minutes old (APNs refuses tokens older than an hour).
/// - Never renewed less than 20 minutes after the previous one (APNs answers `TooManyProviderTokenUpdates`).
/// - Renewed at once when APNs answers `ExpiredProviderToken` for it, within the same 20-minute floor.
///
/// Thread-safe; the clock is injected so tests check the rules without waiting.
package final class ProviderTokenSource: Sendable {
    /// How old a token gets before it is renewed.
    package static let renewalAge: Duration = .seconds(50 * 60)
    /// The least time between two tokens.
    package static let minimumRenewalInterval: Duration = .seconds(20 * 60)

    private struct State {
        var token: ProviderTokenJWT?
        var issuedAt: Date = .distantPast
        var renewals = 0
    }

    private let key: SigningKey
    private let clock: any WallClock
    private let state = Mutex(State())

    /// Creates a source that signs with `key` and reads the time from `clock`.
    package init(key: SigningKey, clock: any WallClock = SystemWallClock()) {
        self.key = key
        self.clock = clock
    }

    /// How many tokens have been signed so far.
    package var tokensIssued: Int { self.state.withLock { $0.renewals } }

    /// The token to send now: the current one, or a new one when the current one is due for renewal.
    package func currentToken() throws -> ProviderTokenJWT {
        let now = self.clock.now()
        return try self.state.withLock { state in
            if let token = state.token, Self.age(since: state.issuedAt, now: now) < Self.renewalAge {
                return token
            }
            return try self.issue(&state, now: now)
        }
    }

    /// APNs answered `ExpiredProviderToken` for `rejected`: returns the token to retry with.
    ///
    /// When another request already renewed it, that newer token is returned. Otherwise a new token is signed,
    /// unless the 20-minute floor forbids it, in which case `nil` is returned (the clock is likely skewed and
    /// a new token would fare no better).
    package func tokenAfterExpiry(of rejected: ProviderTokenJWT) throws -> ProviderTokenJWT? {
        let now = self.clock.now()
        return try self.state.withLock { state in
            if let token = state.token, token != rejected {
                return token
            }
            if Self.age(since: state.issuedAt, now: now) < Self.minimumRenewalInterval {
                return nil
            }
            return try self.issue(&state, now: now)
        }
    }

    private func issue(_ state: inout State, now: Date) throws -> ProviderTokenJWT {
        let token = try ProviderTokenJWT.sign(
            keyID: self.key.keyID,
            teamID: self.key.teamID,
            issuedAtEpochSeconds: Int64(now.timeIntervalSince1970.rounded(.down)),
            privateKey: self.key.privateKey
        )
        state.token = token
        state.issuedAt = now
        state.renewals += 1
        return token
    }

    private static func age(since issued: Date, now: Date) -> Duration {
        .milliseconds(Int64((now.timeIntervalSince(issued) * 1000).rounded(.down)))
    }
}
