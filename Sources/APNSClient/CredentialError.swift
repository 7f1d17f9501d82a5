/// A credential (a `.p8` key, a `.p12` bundle, a PEM certificate or key) that could not be used.
///
/// It names the file and the cause, never a key, a password or a token.
package struct CredentialError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    package enum Code: String, Sendable, Hashable {
        /// The file could not be read.
        case unreadable
        /// The file is not a PKCS#8 P-256 private key in PEM form.
        case invalidSigningKey
        /// The `.p12` bundle could not be opened (often a wrong password).
        case invalidPKCS12
        /// The PEM certificate could not be parsed.
        case invalidCertificate
        /// The PEM private key could not be parsed.
        case invalidPrivateKey
        /// A field such as the key ID or team ID is malformed.
        case invalidIdentifier
        /// The environment variable naming the password is not set.
        case missingPassword
    }

    /// What went wrong.
    package var code: Code
    /// The file (or setting) concerned.
    package var file: String
    /// Why, in words; never contains secret material.
    package var cause: String

    /// Creates an error.
    package init(code: Code, file: String, cause: String) {
        self.code = code
        self.file = file
        self.cause = cause
    }

    /// `file: cause (code)`.
    package var description: String { "\(self.file): \(self.cause) (\(self.code.rawValue))" }
}
