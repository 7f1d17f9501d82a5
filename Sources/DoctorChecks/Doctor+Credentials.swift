import APNSClient
import APNSCore
import Configuration
import Foundation
import Routing

// The credentials of a provider: the key or certificate loads, and a certificate's validity, environment and topics.
extension Doctor {
    /// The parsed credentials a provider authenticates with.
    enum Credentials {
        case token(SigningKey)
        case certificate(CertificateCredentials)
        case unusable
    }

    func checkCredentials(_ settings: APNSSettings, scope: String, routes: [RouteSpec])
        -> (Credentials, [DoctorCheck])
    {
        let name = "\(scope) credentials"
        do throws(CredentialError) {
            switch settings.auth {
            case .token(let keyFile, let keyID, let teamID):
                let key = try SigningKey.load(p8Path: keyFile, keyID: keyID, teamID: teamID)
                return (
                    .token(key),
                    [DoctorCheck(.ok, name, "\(keyFile): P-256 signing key (key ID \(keyID), team ID \(teamID))")]
                )
            case .pkcs12(let file, let password):
                let credentials = try CertificateCredentials.load(p12Path: file, password: password?.value ?? "")
                return (
                    .certificate(credentials),
                    [DoctorCheck(.ok, name, "\(file): PKCS#12 bundle opens (certificate and private key)")]
                        + self.checkCertificate(credentials, settings: settings, scope: scope, routes: routes)
                )
            case .pem(let certificateFile, let keyFile):
                let credentials = try CertificateCredentials.load(
                    certificatePEMPath: certificateFile, keyPEMPath: keyFile)
                return (
                    .certificate(credentials),
                    [DoctorCheck(.ok, name, "\(certificateFile) and \(keyFile): PEM certificate and private key")]
                        + self.checkCertificate(credentials, settings: settings, scope: scope, routes: routes)
                )
            }
        } catch {
            let hint =
                switch error.code {
                case .invalidPKCS12: "check p12_password (or p12_password_file) and re-export the .p12 from Keychain"
                case .invalidSigningKey:
                    "use the AuthKey_KEYID.p8 downloaded from developer.apple.com (Keys), unmodified"
                case .invalidCertificate, .invalidPrivateKey:
                    "cert_file must hold the PEM certificate, key_file its unencrypted PEM private key "
                        + "(openssl pkcs12 -in push.p12 -nodes)"
                case .unreadable: "check the path and that the bridge's user may read it"
                case .invalidIdentifier: "copy key_id and team_id from developer.apple.com (10 letters and digits)"
                case .missingPassword: "set the password's environment variable"
                }
            return (.unusable, [DoctorCheck(.fail, name, error.description, hint: hint)])
        }
    }

    private func checkCertificate(
        _ credentials: CertificateCredentials,
        settings: APNSSettings,
        scope: String,
        routes: [RouteSpec]
    ) -> [DoctorCheck] {
        let inspection: CertificateInspection
        do {
            inspection = try CertificateInspection(credentials.certificateChain[0])
        } catch {
            return [
                DoctorCheck(
                    .fail, "\(scope) certificate", "swift-certificates cannot read the certificate: \(error)",
                    hint: "export the APNs certificate again from developer.apple.com"
                )
            ]
        }
        return [
            self.checkExpiry(inspection, scope: scope),
            self.checkEnvironment(inspection, settings: settings, scope: scope, routes: routes),
        ]
    }

    func checkExpiry(_ inspection: CertificateInspection, scope: String) -> DoctorCheck {
        let now = self.clock.now()
        let name = "\(scope) certificate expiry"
        let formatter = ISO8601DateFormatter()
        let until = formatter.string(from: inspection.notValidAfter)
        let hint = "create a new APNs certificate on developer.apple.com (or switch to token auth, which never expires)"
        if inspection.notValidAfter < now {
            return DoctorCheck(.fail, name, "\(inspection.subject) expired on \(until)", hint: hint)
        }
        if inspection.notValidBefore > now {
            return DoctorCheck(
                .fail, name,
                "\(inspection.subject) is not valid before \(formatter.string(from: inspection.notValidBefore))",
                hint: "check this host's clock"
            )
        }
        let days = Int(inspection.notValidAfter.timeIntervalSince(now) / 86_400)
        let warning = Double(self.options.certificateExpiryWarning.components.seconds)
        if inspection.notValidAfter.timeIntervalSince(now) < warning {
            return DoctorCheck(.warn, name, "\(inspection.subject) expires in \(days) days, on \(until)", hint: hint)
        }
        return DoctorCheck(.ok, name, "valid until \(until) (\(days) days)")
    }

    func checkEnvironment(
        _ inspection: CertificateInspection,
        settings: APNSSettings,
        scope: String,
        routes: [RouteSpec]
    ) -> DoctorCheck {
        let name = "\(scope) certificate environment and topics"
        guard inspection.hasApplePushExtensions else {
            return DoctorCheck(
                .warn, name,
                "\(inspection.subject) carries none of Apple's push extensions (1.2.840.113635.100.6.3.x): "
                    + "environment and topics not checked",
                hint: "use the certificate created for the app under Certificates on developer.apple.com"
            )
        }
        let universal = inspection.listedTopics != nil
        let environment = settings.environment
        let covers =
            switch environment {
            case .production: inspection.isProduction || universal
            case .sandbox: inspection.isDevelopment || universal
            }
        if !covers {
            let has = inspection.isProduction ? "production" : "development (sandbox)"
            return DoctorCheck(
                .fail, name, "a \(has) certificate, but environment is \(environment.rawValue)",
                hint: "set environment to \(inspection.isProduction ? "production" : "sandbox") or use a "
                    + "Sandbox & Production certificate"
            )
        }
        let covered = Set(inspection.topics)
        let bundles = Set(routes.map { Self.bundleID(of: $0) })
        let uncovered = bundles.subtracting(covered).sorted()
        if !covered.isEmpty, !uncovered.isEmpty {
            return DoctorCheck(
                .fail, name,
                "routes use \(uncovered.joined(separator: ", ")), the certificate covers "
                    + "\(covered.sorted().joined(separator: ", "))",
                hint: "use the certificate of that bundle ID, or move those routes to an app with the right credentials"
            )
        }
        let voipRoutes = routes.filter { $0.pushType == PushType.voip.rawValue }.map(\.name)
        if !voipRoutes.isEmpty, !inspection.isVoIP, !universal {
            return DoctorCheck(
                .warn, name,
                "routes \(voipRoutes.joined(separator: ", ")) send voip, the certificate has no VoIP extension",
                hint: "create a VoIP Services certificate, or use token auth"
            )
        }
        let kinds = [inspection.isDevelopment ? "development" : nil, inspection.isProduction ? "production" : nil]
            .compactMap { $0 }
        return DoctorCheck(
            .ok, name,
            "\(kinds.isEmpty ? "universal" : kinds.joined(separator: "+")) certificate for "
                + "\(covered.sorted().joined(separator: ", ")); environment \(environment.rawValue)"
        )
    }
}
