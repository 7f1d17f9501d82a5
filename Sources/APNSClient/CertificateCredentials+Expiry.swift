import NIOSSL

extension CertificateCredentials {
    /// The leaf certificate's not-after time, in seconds since the UNIX epoch (`pushbridge_credential_expiry_seconds`,
    /// docs/operations.md): APNs refuses the certificate from then on.
    package var notValidAfterEpochSeconds: Int64? {
        self.certificateChain.first.map { Int64($0.notValidAfter) }
    }
}
