import Crypto
import Foundation
import SwiftASN1
import X509

/// A self-signed server certificate for the standalone simulator, valid for `localhost` and `127.0.0.1`.
///
/// It is its own CA, so a client trusts it by adding the certificate file as a trust root (for example
/// `pushbridge send --ca-file <certificate>`).
package struct SelfSignedCertificate: Sendable {
    /// The PEM certificate file.
    package var certificatePath: String
    /// The PEM (PKCS#8) private key file.
    package var privateKeyPath: String

    /// Generates a P-256 key and a certificate valid for 30 days, and writes both into `directory`.
    package static func generate(in directory: String) throws -> SelfSignedCertificate {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("PushBridge APNs simulator") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(30 * 24 * 3600),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(.init(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(key)
        )
        let certificatePath = (directory as NSString).appendingPathComponent("simulator-cert.pem")
        let keyPath = (directory as NSString).appendingPathComponent("simulator-key.pem")
        try Data(try certificate.serializeAsPEM().pemString.utf8).write(to: URL(fileURLWithPath: certificatePath))
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        return SelfSignedCertificate(certificatePath: certificatePath, privateKeyPath: keyPath)
    }
}
