import APNSClient
import APNSCore
import ArgumentParser
import BinaryProvider
import Configuration
import EgressProxy
import Foundation
import NIOSSL

/// `pushbridge send`: send one notification to APNs and print the result.
///
/// Exit status: 0 only when APNs answered 200; 1 on any other answer or when no answer came; 2 on usage
/// errors and unusable credentials.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification to APNs and print the result (status, apns-id, reason, apns-unique-id).",
        discussion: """
            Authentication is one of:
              --key-file AuthKey.p8 --key-id KID --team-id TID     (token-based)
              --cert-file cert.p12 [--cert-password-env VAR]       (certificate-based, PKCS#12)
              --cert-file cert.pem --key-file key.pem              (certificate-based, PEM)
            Exit status: 0 when APNs answers 200, 1 otherwise, 2 on usage errors.
            """
    )

    @Option(help: "The device token (hex).")
    var token: String

    @Option(help: "The app's bundle ID; the push type's suffix is added when missing.")
    var topic: String

    @Option(help: "The alert text (builds {\"aps\":{\"alert\":TEXT}}).")
    var alert: String?

    @Option(help: "The payload: one JSON object.")
    var payload: String?

    @Option(help: "A file holding the payload JSON object.")
    var payloadFile: String?

    @Option(help: "apns-push-type: \(PushType.allCases.map(\.rawValue).joined(separator: ", ")).")
    var pushType: String = PushType.alert.rawValue

    @Option(help: "apns-priority: 10, 5 or 1 (default: 10, or 5 for background).")
    var priority: Int?

    @Option(help: "apns-expiration in UNIX epoch seconds (0: try once, do not store).")
    var expiration: Int64?

    @Option(help: "apns-collapse-id (at most 64 bytes).")
    var collapseId: String?

    @Option(help: "apns-id (a UUID); generated when omitted.")
    var apnsId: String?

    @Flag(help: "Send to the sandbox (api.sandbox.push.apple.com) instead of production.")
    var sandbox = false

    @Option(help: "Send to this server instead, e.g. https://127.0.0.1:2197 (the simulator).")
    var endpoint: String?

    @Option(help: "A PEM file of extra CA certificates to trust (e.g. the simulator's certificate).")
    var caFile: String?

    @Option(
        help: ArgumentHelp(
            "An HTTP proxy to tunnel through with CONNECT: http://[user:password@]host:port, or none.",
            discussion: "Default: the environment's https_proxy or HTTPS_PROXY, except for NO_PROXY's hosts and "
                + "loopback ones. A password here shows in the process list; prefer HTTPS_PROXY."))
    var proxy: String?

    @Option(help: "Token auth: the .p8 key; certificate auth with --cert-file PEM: the PEM private key.")
    var keyFile: String?

    @Option(help: "Token auth: the 10-character key ID.")
    var keyId: String?

    @Option(help: "Token auth: the 10-character team ID.")
    var teamId: String?

    @Option(help: "Certificate auth: a .p12 bundle, or a PEM certificate together with --key-file.")
    var certFile: String?

    @Option(help: "Certificate auth: the environment variable holding the .p12 password (default: none).")
    var certPasswordEnv: String?

    @Option(help: "Seconds to wait for the answer (1 to \(Self.maximumTimeoutSeconds)).")
    var timeout: Int = 30

    @Option(
        name: .customLong("protocol"),
        help: "http2 (Apple's API) or binary (the legacy binary provider protocol; certificate auth only).")
    var providerProtocol: String = "http2"

    @Option(help: "Binary protocol: the gateway as host:port (default: Apple's historical gateway; --sandbox).")
    var gateway: String?

    @Option(help: "Binary protocol: framed, enhanced or simple.")
    var format: String = "framed"

    /// The longest `--timeout`: an hour is far beyond any APNs answer, and a bound keeps every deadline
    /// computed from it representable.
    static let maximumTimeoutSeconds = 3600
    /// The latest `--expiration`: 9999-12-31T23:59:59Z. APNs reads the header as epoch seconds; anything later
    /// is a typo (milliseconds instead of seconds, most often).
    static let maximumExpirationEpochSeconds: Int64 = 253_402_300_799

    /// Out-of-range numbers are usage errors (exit 2), found before anything is read or sent.
    func validate() throws {
        guard (1...Self.maximumTimeoutSeconds).contains(self.timeout) else {
            throw ValidationError(
                "--timeout must be between 1 and \(Self.maximumTimeoutSeconds) seconds, got \(self.timeout)")
        }
        if let expiration = self.expiration, !(0...Self.maximumExpirationEpochSeconds).contains(expiration) {
            throw ValidationError(
                "--expiration must be UNIX epoch seconds between 0 and \(Self.maximumExpirationEpochSeconds), "
                    + "got \(expiration) (milliseconds by mistake?)"
            )
        }
        if let priority = self.priority, Priority(rawValue: priority) == nil {
            throw ValidationError("--priority must be 10, 5 or 1, got \(priority)")
        }
    }

    func run() async throws {
        let notification = try Self.usage { try self.makeNotification() }
        let result: APNSResult
        switch self.providerProtocol {
        case "http2":
            let configuration = try Self.usage { try self.makeConfiguration() }
            try Self.refuseLocally(notification, NotificationValidation.validate(notification), rules: "Apple's rules")
            let client = APNSClient(configuration: configuration)
            result = await client.withRunning { await client.send(notification) }
        case "binary":
            let client = try Self.usage { try self.makeBinaryClient(for: notification) }
            result = await client.send(notification)
            await client.close()
        default:
            FileHandleOutput.standardError(
                "error: --protocol must be http2 or binary, got '\(self.providerProtocol)'\n")
            throw ExitCode(2)
        }
        Self.print(result)
        if case .answered(let response) = result, response.status == 200 {
            return
        }
        throw ExitCode(1)
    }

    /// Runs `body`; a usage or credential problem (a CA file included) or TLS material NIOSSL refuses ends the
    /// command with exit status 2.
    private static func usage<Value>(_ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch let error as UsageError {
            FileHandleOutput.standardError("error: \(error.message)\n")
        } catch let error as CredentialError {
            FileHandleOutput.standardError("error: \(error)\n")
        } catch let error as NIOSSLError {
            FileHandleOutput.standardError("error: the TLS material is not usable: \(error)\n")
        }
        throw ExitCode(2)
    }

    /// Prints the local refusal and ends with exit status 1 when `reason` is not `nil`.
    private static func refuseLocally(_ notification: APNSCore.Notification, _ reason: Reason?, rules: String) throws {
        guard let reason else { return }
        Self.print(.answered(APNSResponse(status: reason.status ?? 400, apnsID: notification.apnsID, reason: reason)))
        FileHandleOutput.standardError("not sent: the notification breaks \(rules) (\(reason.rawValue))\n")
        throw ExitCode(1)
    }

    /// `--protocol binary`: a ``BinaryClient`` for the gateway; `delivered` will mean no error packet came within
    /// the quiet window (1 s) on an open connection (docs/binary-protocol.md). A notification the binary protocol
    /// cannot carry ends the command first (exit 1).
    private func makeBinaryClient(for notification: APNSCore.Notification) throws -> BinaryClient {
        guard let format = BinaryFormat(rawValue: self.format) else {
            throw UsageError(message: "--format must be framed, enhanced or simple, got '\(self.format)'")
        }
        guard self.endpoint == nil else {
            throw UsageError(message: "--endpoint is for HTTP/2; give the binary gateway with --gateway host:port")
        }
        guard case .certificate(let credentials) = try self.makeAuthentication() else {
            throw UsageError(message: "the binary protocol takes certificate auth only (--cert-file)")
        }
        var gateway = BinaryProtocolSettings.appleGateway(self.sandbox ? .sandbox : .production)
        if let text = self.gateway {
            guard let parsed = APNSSettings.Endpoint(hostAndPort: text) else {
                throw UsageError(message: "--gateway '\(text)' is not host:port")
            }
            gateway = parsed
        }
        var configuration = BinaryClientConfiguration(host: gateway.host, port: gateway.port, credentials: credentials)
        configuration.format = format
        configuration.connectTimeout = .seconds(min(self.timeout, 10))
        configuration.additionalTrustRootsPEMFile = self.caFile
        configuration.proxy = try self.egressProxy(forHost: gateway.host)
        let fault = BinaryFrame.validate(
            notification, format: format, payloadLimitBytes: configuration.payloadLimitBytes)
        try Self.refuseLocally(notification, fault?.reason, rules: "the binary protocol's rules")
        return try BinaryClient(configuration: configuration)
    }

    private static func print(_ result: APNSResult) {
        switch result {
        case .answered(let response):
            Swift.print("status: \(response.status)")
            Swift.print("apns-id: \(response.apnsID ?? "-")")
            Swift.print("reason: \(response.reason?.rawValue ?? "-")")
            Swift.print("apns-unique-id: \(response.apnsUniqueID ?? "-")")
            if let since = response.invalidSinceEpochMilliseconds {
                Swift.print("timestamp: \(since)")
            }
        case .failed(let failure):
            Swift.print("status: -")
            Swift.print("apns-id: -")
            Swift.print("reason: \(failure.reason)")
            Swift.print("apns-unique-id: -")
            if case .unreachable(let why) = failure {
                Swift.print("detail: \(why)")
            } else if case .malformedResponse(let why) = failure {
                Swift.print("detail: \(why)")
            }
        }
    }

    private struct UsageError: Error {
        var message: String
    }

    private func makeNotification() throws -> APNSCore.Notification {
        guard let pushType = PushType(rawValue: self.pushType) else {
            throw UsageError(
                message: "--push-type '\(self.pushType)' is not one of "
                    + PushType.allCases.map(\.rawValue).joined(separator: ", ")
            )
        }
        var priority: Priority?
        if let number = self.priority {
            guard let parsed = Priority(rawValue: number) else {
                throw UsageError(message: "--priority must be 10, 5 or 1, got \(number)")
            }
            priority = parsed
        }
        var id = UUID()
        if let apnsId = self.apnsId {
            guard let parsed = UUID(uuidString: apnsId) else {
                throw UsageError(message: "--apns-id must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
            }
            id = parsed
        }
        return APNSCore.Notification(
            deviceToken: self.token,
            topic: pushType.topic(for: self.topic),
            pushType: pushType,
            priority: priority,
            expirationEpochSeconds: self.expiration,
            collapseID: self.collapseId,
            id: id,
            payload: try self.makePayload(pushType: pushType)
        )
    }

    private func makePayload(pushType: PushType) throws -> [UInt8] {
        let given = [self.alert != nil, self.payload != nil, self.payloadFile != nil].filter { $0 }.count
        guard given <= 1 else { throw UsageError(message: "give at most one of --alert, --payload, --payload-file") }
        let bytes: [UInt8]
        if let alert = self.alert {
            let object: [String: Any] = ["aps": ["alert": alert]]
            bytes = Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        } else if let payload = self.payload {
            bytes = Array(payload.utf8)
        } else if let file = self.payloadFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw UsageError(message: "--payload-file \(file): cannot read the file")
            }
            bytes = Array(data)
        } else if pushType == .background {
            bytes = Array("{\"aps\":{\"content-available\":1}}".utf8)
        } else {
            bytes = Array("{\"aps\":{\"alert\":\"PushBridge test notification\"}}".utf8)
        }
        guard (try? JSONSerialization.jsonObject(with: Data(bytes))) is [String: Any] else {
            throw UsageError(message: "the payload must be one JSON object, e.g. {\"aps\":{\"alert\":\"hi\"}}")
        }
        return bytes
    }

    private func makeConfiguration() throws -> APNSClientConfiguration {
        var endpoint = self.sandbox ? APNSClientConfiguration.Endpoint.sandbox : .production
        if let url = self.endpoint {
            guard !self.sandbox else { throw UsageError(message: "give either --sandbox or --endpoint, not both") }
            guard let parsed = APNSClientConfiguration.Endpoint(url: url) else {
                throw UsageError(message: "--endpoint '\(url)' is not https://host[:port]")
            }
            endpoint = parsed
        }
        return APNSClientConfiguration(
            endpoint: endpoint,
            proxy: try self.egressProxy(forHost: endpoint.host),
            authentication: try self.makeAuthentication(),
            connectionCount: 1,
            requestTimeout: .seconds(self.timeout),
            connectTimeout: .seconds(min(self.timeout, 10)),
            maxResends: 1,
            additionalTrustRootsPEMFile: self.caFile
        )
    }

    /// `--proxy`, else the environment's (`HTTPS_PROXY`, `NO_PROXY`), for a connection to `host`. Neither message
    /// quotes the URL: it may hold a password.
    private func egressProxy(forHost host: String) throws -> EgressProxy? {
        guard let text = self.proxy else {
            do {
                return try EgressProxyPolicy.fromEnvironment(ProcessInfo.processInfo.environment).proxy(forHost: host)
            } catch {
                throw UsageError(message: "\(error); fix it (\(ProxyURLError.form)), or give --proxy none")
            }
        }
        if text.trimmingCharacters(in: .whitespaces).lowercased() == "none" { return nil }
        do {
            return try EgressProxy(url: text)
        } catch {
            throw UsageError(message: "--proxy: the proxy URL \(error.problem) (\(error.fix))")
        }
    }

    private func makeAuthentication() throws -> APNSAuthentication {
        switch (self.certFile, self.keyFile, self.keyId, self.teamId) {
        case (nil, let keyFile?, let keyID?, let teamID?):
            let key = try SigningKey.load(p8Path: keyFile, keyID: keyID, teamID: teamID)
            return .token(ProviderTokenSource(key: key))
        case (let certFile?, let keyFile?, nil, nil):
            return .certificate(try CertificateCredentials.load(certificatePEMPath: certFile, keyPEMPath: keyFile))
        case (let certFile?, nil, nil, nil):
            var password = ""
            if let variable = self.certPasswordEnv {
                guard let value = ProcessInfo.processInfo.environment[variable] else {
                    throw CredentialError(
                        code: .missingPassword,
                        file: certFile,
                        cause: "the environment variable \(variable) (--cert-password-env) is not set"
                    )
                }
                password = value
            }
            return .certificate(try CertificateCredentials.load(p12Path: certFile, password: password))
        default:
            throw UsageError(
                message: "give one authentication: --key-file P8 --key-id KID --team-id TID, "
                    + "or --cert-file P12 [--cert-password-env VAR], or --cert-file PEM --key-file PEM"
            )
        }
    }
}
