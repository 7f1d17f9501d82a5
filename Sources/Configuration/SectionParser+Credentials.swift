import Crypto
import Foundation

/// What a credential file must contain.
enum CredentialKind {
    /// An APNs auth key: a PKCS#8 P-256 private key in PEM (`AuthKey_XXXXXXXXXX.p8`).
    case p8
    /// A PKCS#12 archive (`.p12`) holding the push certificate and its key.
    case pkcs12
    /// One or more PEM certificates.
    case certificates
    /// A PEM private key.
    case pemKey

    /// The problem with `contents`, or `nil` when they look right. Never quotes the contents.
    func check(_ contents: Data) -> String? {
        let text = String(decoding: contents, as: UTF8.self)
        switch self {
        case .p8:
            if (try? P256.Signing.PrivateKey(pemRepresentation: text)) == nil {
                return "is not an APNs auth key (a PEM \"PRIVATE KEY\" on the P-256 curve, as in a .p8 file)"
            }
        case .pkcs12:
            if contents.first != 0x30 {
                return "is not a PKCS#12 (.p12) archive"
            }
        case .certificates:
            if !text.contains("-----BEGIN CERTIFICATE-----") {
                return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            }
        case .pemKey:
            if !text.contains("PRIVATE KEY-----") {
                return "holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)"
            }
        }
        return nil
    }
}

extension SectionParser {
    /// Checks the credential file at `path` (named by `value`) and returns the path. With file checks off
    /// (`pushbridge render`) the file is not touched.
    func credentialFile(_ path: String, at value: ConfigValue, kind: CredentialKind) -> String {
        let path = path.trimmingWhitespace()
        guard self.checksFiles, let contents = self.read(path, at: value, what: "file") else {
            return path
        }
        if let problem = kind.check(contents) {
            value.report(.credentialFile, "\(path) \(problem)")
        }
        return path
    }

    /// The contents of the secret file at `path`, one trailing newline removed.
    func secret(fromFile path: String, at value: ConfigValue) -> String? {
        guard self.checksFiles else {
            return ""
        }
        guard let contents = self.read(path.trimmingWhitespace(), at: value, what: "secret file") else {
            return nil
        }
        var text = String(decoding: contents, as: UTF8.self)
        if text.hasSuffix("\r\n") {
            text.removeLast(1)  // "\r\n" is one Character
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        return text
    }

    /// A secret given as `name: VALUE` or `name_file: PATH`, or `nil` when neither is given.
    func secret(named name: String, in mapping: ConfigMapping) -> Secret? {
        let fileKey = name + "_file"
        switch (mapping[name], mapping[fileKey]) {
        case (nil, nil):
            return nil
        case (let value?, nil):
            return value.string().map(Secret.init)
        case (nil, let file?):
            return file.nonEmptyString().flatMap { self.secret(fromFile: $0, at: file) }.map(Secret.init)
        case (_, let file?):
            file.report(.invalidValue, "give either \(name) or \(fileKey), not both")
            return nil
        }
    }

    /// The bytes of `path`, or `nil` after reporting why it cannot be read.
    private func read(_ path: String, at value: ConfigValue, what: String) -> Data? {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            value.report(.credentialFile, "\(what) \(path) does not exist", hint: Self.pathHint(path))
            return nil
        }
        guard !isDirectory.boolValue else {
            value.report(.credentialFile, "\(what) \(path) is a directory")
            return nil
        }
        guard manager.isReadableFile(atPath: path), let data = manager.contents(atPath: path) else {
            value.report(.credentialFile, "\(what) \(path) cannot be read", hint: "check its permissions")
            return nil
        }
        guard !data.isEmpty else {
            value.report(.credentialFile, "\(what) \(path) is empty")
            return nil
        }
        return data
    }

    /// Relative paths are resolved against the working directory; say so when one is missing.
    private static func pathHint(_ path: String) -> String? {
        path.hasPrefix("/") ? nil : "relative paths are resolved against the working directory"
    }
}
