import Foundation
import NIOSSL
import SwiftASN1
import X509

/// What an APNs client certificate says about itself: validity, environments, topics (Apple's extensions).
package struct CertificateInspection: Sendable, Hashable {
    /// Apple's extension marking a development (sandbox) push certificate.
    package static let developmentOID = "1.2.840.113635.100.6.3.1"
    /// Apple's extension marking a production push certificate.
    package static let productionOID = "1.2.840.113635.100.6.3.2"
    /// Apple's extension marking a VoIP services certificate.
    package static let voipOID = "1.2.840.113635.100.6.3.4"
    /// Apple's extension listing the topics of a "Sandbox & Production" (universal) certificate.
    package static let topicsOID = "1.2.840.113635.100.6.3.6"
    /// The `UID` attribute of the subject: the bundle ID.
    package static let userIDOID = "0.9.2342.19200300.100.1.1"

    /// The subject, as text.
    package var subject: String
    /// The first date the certificate is valid.
    package var notValidBefore: Date
    /// The last date the certificate is valid.
    package var notValidAfter: Date
    /// The subject's `UID` (Apple puts the bundle ID there).
    package var userID: String?
    /// Carries Apple's development extension.
    package var isDevelopment: Bool
    /// Carries Apple's production extension.
    package var isProduction: Bool
    /// Carries Apple's VoIP extension.
    package var isVoIP: Bool
    /// The topics listed by Apple's topics extension, `nil` when it is absent.
    package var listedTopics: [String]?

    /// Whether any of Apple's push extensions is present.
    package var hasApplePushExtensions: Bool {
        self.isDevelopment || self.isProduction || self.isVoIP || self.listedTopics != nil
    }

    /// Every topic the certificate covers: the listed ones, else the UID.
    package var topics: [String] {
        if let listed = self.listedTopics, !listed.isEmpty { return listed }
        return self.userID.map { [$0] } ?? []
    }

    /// Reads `certificate` (DER inside NIOSSL) with swift-certificates.
    package init(_ certificate: NIOSSLCertificate) throws {
        try self.init(derBytes: try certificate.toDERBytes())
    }

    /// Reads a DER certificate.
    package init(derBytes: [UInt8]) throws {
        let certificate = try Certificate(derEncoded: derBytes)
        self.subject = String(describing: certificate.subject)
        self.notValidBefore = certificate.notValidBefore
        self.notValidAfter = certificate.notValidAfter
        self.userID = certificate.subject.lazy.flatMap { $0 }
            .first { $0.type.description == Self.userIDOID }
            .flatMap { String($0.value) }
        var development = false
        var production = false
        var voip = false
        var listed: [String]?
        for item in certificate.extensions {
            switch item.oid.description {
            case Self.developmentOID: development = true
            case Self.productionOID: production = true
            case Self.voipOID: voip = true
            case Self.topicsOID: listed = Self.topics(inExtensionValue: Array(item.value))
            default: break
            }
        }
        self.isDevelopment = development
        self.isProduction = production
        self.isVoIP = voip
        self.listedTopics = listed
    }

    /// The topics in the value of Apple's topics extension: a SEQUENCE alternating a UTF8String topic and a
    /// SEQUENCE of its kinds (`app`, `voip`, `complication`). Only the topic strings (the outer sequence's direct
    /// string children) are returned; anything unparseable gives what was read so far.
    static func topics(inExtensionValue bytes: [UInt8]) -> [String] {
        guard let outer = DERElement.read(bytes[...]), outer.tag == 0x30 else { return [] }
        var topics: [String] = []
        var rest = outer.content
        while let element = DERElement.read(rest) {
            if element.tag == 0x0C || element.tag == 0x16 || element.tag == 0x13 {
                topics.append(String(decoding: element.content, as: UTF8.self))
            }
            rest = element.remainder
        }
        return topics
    }
}

/// One DER tag-length-value, read without copying.
struct DERElement {
    var tag: UInt8
    var content: ArraySlice<UInt8>
    var remainder: ArraySlice<UInt8>

    /// Reads the element at the start of `bytes` (single-byte tags, definite lengths); `nil` when malformed.
    static func read(_ bytes: ArraySlice<UInt8>) -> DERElement? {
        var index = bytes.startIndex
        guard index < bytes.endIndex else { return nil }
        let tag = bytes[index]
        index += 1
        guard index < bytes.endIndex else { return nil }
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard count >= 1, count <= 4, bytes.endIndex - index >= count else { return nil }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index >= length else { return nil }
        return DERElement(
            tag: tag, content: bytes[index..<index + length], remainder: bytes[(index + length)...])
    }
}
