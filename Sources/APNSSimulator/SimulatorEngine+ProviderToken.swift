import APNSCore
import Foundation

/// Provider tokens whose ES256 signature one connection has verified.
///
/// APNs verifies a provider token once and then trusts the same token string; the simulator does the same, so a
/// client that sends its token on every request (as it must) costs one signature check per token per
/// connection, not one per request. Only tokens that passed every check of their own (parse, known key, team,
/// signature) are kept, so a forged token is verified, and refused, on every request. The age rule is not cached:
/// it is checked on every request, and a token that aged past it is dropped here and verified again if it comes
/// back. The list is short and bounded (``capacity``); a client rotating tokens needs two at a time.
struct VerifiedProviderTokens {
    /// What the checks read from a verified token.
    struct Token {
        /// The whole `authorization` value (`bearer <JWT>`), compared byte for byte.
        var authorization: String
        /// The JWT's `kid`.
        var keyID: String
        /// The JWT's `iat`.
        var issuedAtEpochSeconds: Int64
    }

    /// Tokens kept per connection; the oldest verified is forgotten first.
    static let capacity = 4

    /// Oldest first.
    private var tokens: [Token] = []

    /// The verified token sent as `authorization`, if any.
    func token(for authorization: String) -> Token? {
        self.tokens.last { $0.authorization == authorization }
    }

    mutating func insert(_ token: Token) {
        if self.tokens.count >= Self.capacity { self.tokens.removeFirst() }
        self.tokens.append(token)
    }

    mutating func remove(_ authorization: String) {
        self.tokens.removeAll { $0.authorization == authorization }
    }
}

extension SimulatorEngine {
    /// The provider-token checks of a token-based connection, in the order APNs reports faults. A token is
    /// parsed and its signature verified only the first time the connection sends it (``VerifiedProviderTokens``);
    /// the key binding, the age and the update interval are checked on every request.
    func validateProviderToken(
        _ authorization: String?,
        _ connection: inout ConnectionState,
        _ statistics: inout SimulatorStatistics,
        _ now: Date
    ) -> ErrorBody? {
        guard let authorization else { return ErrorBody(reason: .missingProviderToken) }
        let token: VerifiedProviderTokens.Token
        if let verified = connection.verifiedTokens.token(for: authorization) {
            guard self.trustedKey(verified.keyID) != nil else {
                // Revoked since it was verified.
                connection.verifiedTokens.remove(authorization)
                return ErrorBody(reason: .invalidProviderToken)
            }
            token = verified
            if let boundKey = connection.acceptedKeyID, boundKey != token.keyID {
                return ErrorBody(reason: .unrelatedKeyIdInToken)
            }
        } else {
            guard authorization.hasPrefix("bearer "),
                let jwt = ProviderTokenJWT.parse(String(authorization.dropFirst(7))),
                let key = self.trustedKey(jwt.keyID)
            else { return ErrorBody(reason: .invalidProviderToken) }
            if let team = key.teamID, team != jwt.teamID { return ErrorBody(reason: .invalidProviderToken) }
            if let boundKey = connection.acceptedKeyID, boundKey != jwt.keyID {
                return ErrorBody(reason: .unrelatedKeyIdInToken)
            }
            statistics.providerTokenVerifications += 1
            guard jwt.hasValidSignature(publicKey: key.publicKey) else {
                return ErrorBody(reason: .invalidProviderToken)
            }
            token = VerifiedProviderTokens.Token(
                authorization: authorization, keyID: jwt.keyID, issuedAtEpochSeconds: jwt.issuedAtEpochSeconds)
            connection.verifiedTokens.insert(token)
        }
        if now.timeIntervalSince1970 - Double(token.issuedAtEpochSeconds) > self.maximumTokenAgeSeconds {
            connection.verifiedTokens.remove(authorization)
            return ErrorBody(reason: .expiredProviderToken)
        }
        if connection.acceptedToken == authorization { return nil }
        if let adoptedAt = connection.tokenAdoptedAt,
            now.timeIntervalSince(adoptedAt) < self.minimumTokenUpdateIntervalSeconds
        {
            return ErrorBody(reason: .tooManyProviderTokenUpdates)
        }
        connection.acceptedToken = authorization
        connection.acceptedKeyID = token.keyID
        connection.tokenAdoptedAt = now
        return nil
    }
}
