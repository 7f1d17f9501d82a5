import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// TLS material for tests, generated fresh with swift-certificates and swift-crypto (P-256 keys): a CA, a server
/// certificate for `127.0.0.1` and `localhost`, and a client certificate, all written as PEM files to a new
/// temporary directory.
package struct TestTLS: Sendable {
    /// The directory holding the PEM files.
    package var directory: URL
    /// The CA certificate (`ca.pem`); trust it to accept the server's and the client's certificates.
    package var caCertificatePath: String
    /// The server certificate (`server.pem`), signed by the CA, for 127.0.0.1 and localhost.
    package var serverCertificatePath: String
    /// The server's private key (`server-key.pem`, PKCS#8).
    package var serverKeyPath: String
    /// The client certificate (`client.pem`), signed by the CA, for mutual TLS.
    package var clientCertificatePath: String
    /// The client's private key (`client-key.pem`, PKCS#8).
    package var clientKeyPath: String
    /// The common name of the client certificate.
    package var clientCommonName: String
    /// The CA's private key (`ca-key.pem`, PKCS#8), for ``issueClientCertificate(commonName:)``.
    package var caKeyPath: String

    /// Generates a CA and the server and client certificates it signs; `name` prefixes the common names (use
    /// different names for two independent CAs).
    package static func generate(name: String = "PushBridge Test", clientCommonName: String = "pushbridge-client")
        throws -> TestTLS
    {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushbridge-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)

        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("\(name) CA") }
        let ca = try Self.issue(
            caName, key: caKey, issuer: caName, issuerKey: caKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            }
        )

        func leaf(_ commonName: String, usage: ExtendedKeyUsage.Usage, names: [GeneralName]) throws
            -> (Certificate, P256.Signing.PrivateKey)
        {
            let key = P256.Signing.PrivateKey()
            return (
                try Self.issueLeaf(commonName, key: key, usage: usage, names: names, issuer: caName, issuerKey: caKey),
                key
            )
        }

        let (server, serverKey) = try leaf(
            "\(name) server",
            usage: .serverAuth,
            names: [.dnsName("localhost"), .ipAddress(.init(contentBytes: [127, 0, 0, 1]))]
        )
        let (client, clientKey) = try leaf(clientCommonName, usage: .clientAuth, names: [.dnsName(clientCommonName)])

        func write(_ text: String, _ file: String) throws -> String {
            let url = directory.appendingPathComponent(file)
            try Data(text.utf8).write(to: url)
            return url.path
        }
        return TestTLS(
            directory: directory,
            caCertificatePath: try write(try ca.serializeAsPEM().pemString, "ca.pem"),
            serverCertificatePath: try write(try server.serializeAsPEM().pemString, "server.pem"),
            serverKeyPath: try write(serverKey.pemRepresentation, "server-key.pem"),
            clientCertificatePath: try write(try client.serializeAsPEM().pemString, "client.pem"),
            clientKeyPath: try write(clientKey.pemRepresentation, "client-key.pem"),
            clientCommonName: clientCommonName,
            caKeyPath: try write(caKey.pemRepresentation, "ca-key.pem")
        )
    }

    /// A certificate for `key` named `subject`, signed by `issuerKey` as `issuer`: valid from an hour ago for 29 days,
    /// clearly inside `pushbridge doctor`'s 30-day expiry warning, never on its edge.
    private static func issue(
        _ subject: DistinguishedName, key: P256.Signing.PrivateKey, issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey, extensions: Certificate.Extensions
    ) throws -> Certificate {
        let now = Date()
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(29 * 24 * 3600),
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(issuerKey)
        )
    }

    /// A server or client certificate named `commonName` for `names`, signed by `issuerKey` as `issuer`.
    private static func issueLeaf(
        _ commonName: String, key: P256.Signing.PrivateKey, usage: ExtendedKeyUsage.Usage, names: [GeneralName],
        issuer: DistinguishedName, issuerKey: P256.Signing.PrivateKey
    ) throws -> Certificate {
        try Self.issue(
            try DistinguishedName { CommonName(commonName) }, key: key, issuer: issuer, issuerKey: issuerKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([usage])
                SubjectAlternativeNames(names)
            })
    }

    /// Issues another client certificate from this material's CA (a renewal, as Apple issues a new certificate for
    /// the same app), with a new key; writes `<commonName>.pem` and `<commonName>-key.pem` to ``directory`` and
    /// returns their paths.
    package func issueClientCertificate(commonName: String) throws -> (certificatePath: String, keyPath: String) {
        let ca = try Certificate(pemEncoded: try String(contentsOfFile: self.caCertificatePath, encoding: .utf8))
        let caKey = try P256.Signing.PrivateKey(
            pemRepresentation: try String(contentsOfFile: self.caKeyPath, encoding: .utf8))
        let key = P256.Signing.PrivateKey()
        let certificate = try Self.issueLeaf(
            commonName, key: key, usage: .clientAuth, names: [.dnsName(commonName)], issuer: ca.subject,
            issuerKey: caKey)
        let certificatePath = self.directory.appendingPathComponent("\(commonName).pem").path
        let keyPath = self.directory.appendingPathComponent("\(commonName)-key.pem").path
        try Data(try certificate.serializeAsPEM().pemString.utf8).write(to: URL(fileURLWithPath: certificatePath))
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        return (certificatePath, keyPath)
    }

    /// The CA certificate, loaded for NIOSSL.
    package func caCertificate() throws -> NIOSSLCertificate {
        try NIOSSLCertificate.fromPEMFile(self.caCertificatePath)[0]
    }

    /// The server certificate chain, loaded for NIOSSL.
    package func serverCertificateChain() throws -> [NIOSSLCertificate] {
        try NIOSSLCertificate.fromPEMFile(self.serverCertificatePath)
    }

    /// The server private key, loaded for NIOSSL.
    package func serverPrivateKey() throws -> NIOSSLPrivateKey {
        try NIOSSLPrivateKey(file: self.serverKeyPath, format: .pem)
    }

    /// The client certificate chain, loaded for NIOSSL.
    package func clientCertificateChain() throws -> [NIOSSLCertificate] {
        try NIOSSLCertificate.fromPEMFile(self.clientCertificatePath)
    }

    /// The client private key, loaded for NIOSSL.
    package func clientPrivateKey() throws -> NIOSSLPrivateKey {
        try NIOSSLPrivateKey(file: self.clientKeyPath, format: .pem)
    }

    /// The client certificate and key as a PKCS#12 bundle (`client.p12`, made by `openssl pkcs12 -export`)
    /// protected by `password`; returns its path.
    package func exportClientP12(password: String) async throws -> String {
        let output = self.directory.appendingPathComponent("client.p12").path
        let result = try await Subprocess.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "openssl", "pkcs12", "-export", "-in", self.clientCertificatePath, "-inkey", self.clientKeyPath,
                "-out", output, "-passout", "pass:\(password)",
            ])
        guard result.status == 0 else {
            throw ExportFailed(status: result.status)
        }
        return output
    }

    /// `openssl pkcs12 -export` failed.
    package struct ExportFailed: Error {
        /// Its exit status.
        package var status: Int32
    }

    /// Deletes the directory and its PEM files.
    package func remove() {
        try? FileManager.default.removeItem(at: self.directory)
    }
}
