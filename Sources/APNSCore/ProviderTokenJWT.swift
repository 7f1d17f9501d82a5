import Crypto
import Foundation

/// Where wall-clock time comes from. JWT `iat` and token ages are wall-clock rules, so the client and the
/// simulator take the time from here and tests inject a clock they move by hand.
package protocol WallClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's wall clock.
package struct SystemWallClock: WallClock {
    /// Creates the system clock.
    package init() {}

    /// The current time.
    package func now() -> Date { Date() }
}

/// An APNs provider token: an ES256 JWT with header `{alg, kid}` and claims `{iss, iat}`, `iat` an integer
/// number of seconds (Apple: *Establishing a token-based connection to APNs*).
package struct ProviderTokenJWT: Sendable, Hashable {
    /// The key ID (`kid`).
    package var keyID: String
    /// The team ID (`iss`).
    package var teamID: String
    /// When the token was issued (`iat`), in UNIX epoch seconds.
    package var issuedAtEpochSeconds: Int64
    /// The compact serialisation, `header.claims.signature`, base64url; what follows `bearer `.
    package var compact: String

    /// Signs a new token with `privateKey`.
    package static func sign(
        keyID: String,
        teamID: String,
        issuedAtEpochSeconds: Int64,
        privateKey: P256.Signing.PrivateKey
    ) throws -> ProviderTokenJWT {
        let header = "{\"alg\":\"ES256\",\"kid\":\"\(JSONText.escaped(keyID))\"}"
        let claims = "{\"iss\":\"\(JSONText.escaped(teamID))\",\"iat\":\(issuedAtEpochSeconds)}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try privateKey.signature(for: Array(signingInput.utf8))
        return ProviderTokenJWT(
            keyID: keyID,
            teamID: teamID,
            issuedAtEpochSeconds: issuedAtEpochSeconds,
            compact: signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
        )
    }

    /// Parses a compact token without checking its signature; `nil` when it is not an ES256 JWT with a
    /// string `kid`, a string `iss` and an integer `iat`.
    package static func parse(_ compact: String) -> ProviderTokenJWT? {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]),
            let claimBytes = Base64URL.decode(parts[1]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimBytes)),
            header.alg == "ES256"
        else { return nil }
        return ProviderTokenJWT(
            keyID: header.kid,
            teamID: claims.iss,
            issuedAtEpochSeconds: claims.iat,
            compact: compact
        )
    }

    /// The JOSE header; decoding fails unless both fields are strings.
    private struct Header: Decodable {
        var alg: String
        var kid: String
    }

    /// The claims; decoding fails unless `iat` is an integer (a string or a fraction is refused).
    private struct Claims: Decodable {
        var iss: String
        var iat: Int64
    }

    /// Whether the signature is `publicKey`'s ES256 signature of the header and claims.
    package func hasValidSignature(publicKey: P256.Signing.PublicKey) -> Bool {
        guard let lastDot = self.compact.lastIndex(of: ".") else { return false }
        let signingInput = self.compact[..<lastDot]
        guard let signatureBytes = Base64URL.decode(self.compact[self.compact.index(after: lastDot)...]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { return false }
        return publicKey.isValidSignature(signature, for: Array(signingInput.utf8))
    }
}

/// Base64url without padding (RFC 7515 §2), as JWTs use it.
package enum Base64URL {
    /// Encodes `bytes`.
    package static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.last == "=" { text.removeLast() }
        return text
    }

    /// Decodes `text`; `nil` when it is not base64url.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return Array(data)
    }
}
