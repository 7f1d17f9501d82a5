import Foundation
import NIOSSL

/// A client certificate and its private key for certificate-based APNs authentication (mutual TLS).
package struct CertificateCredentials: Sendable {
    /// The certificate chain, leaf first.
    package var certificateChain: [NIOSSLCertificate]
    /// The leaf's private key.
    package var privateKey: NIOSSLPrivateKey

    /// Creates credentials from their parts.
    package init(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }

    /// Opens a `.p12` bundle. A wrong password gives a ``CredentialError`` naming the file, not the password.
    package static func load(p12Path path: String, password: String) throws(CredentialError) -> CertificateCredentials {
        guard let contents = FileManager.default.contents(atPath: path) else {
            throw CredentialError(code: .unreadable, file: path, cause: "cannot read the certificate bundle")
        }
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: Array(contents), passphrase: Array(password.utf8))
        } catch {
            throw CredentialError(
                code: .invalidPKCS12,
                file: path,
                cause: "cannot open the PKCS#12 bundle: the password is wrong or the file is not a .p12"
            )
        }
        guard !bundle.certificateChain.isEmpty else {
            throw CredentialError(code: .invalidPKCS12, file: path, cause: "the bundle holds no certificate")
        }
        return CertificateCredentials(certificateChain: bundle.certificateChain, privateKey: bundle.privateKey)
    }

    /// Reads a PEM certificate (chain) and a PEM private key.
    package static func load(certificatePEMPath: String, keyPEMPath: String) throws(CredentialError)
        -> CertificateCredentials
    {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePEMPath)
        } catch {
            throw CredentialError(
                code: .invalidCertificate,
                file: certificatePEMPath,
                cause: "not a readable PEM certificate (-----BEGIN CERTIFICATE-----)"
            )
        }
        guard !chain.isEmpty else {
            throw CredentialError(code: .invalidCertificate, file: certificatePEMPath, cause: "no certificate found")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPEMPath, format: .pem)
        } catch {
            throw CredentialError(
                code: .invalidPrivateKey,
                file: keyPEMPath,
                cause: "not a readable, unencrypted PEM private key"
            )
        }
        return CertificateCredentials(certificateChain: chain, privateKey: key)
    }
}

/// How a client proves who it is to APNs.
package enum APNSAuthentication: Sendable {
    /// Token-based: an ES256 provider token in `authorization` on every request.
    case token(ProviderTokenSource)
    /// Certificate-based: a client certificate in the TLS handshake.
    case certificate(CertificateCredentials)
}
