import BridgeCore
import Configuration

/// Kafka headers on outcome and invalid-token records.
package enum RecordHeader {
    /// `pushbridge-protocol`: the provider protocol a notification went out on, on its outcome and invalid-token
    /// records; present only for `binary` (absent means HTTP/2, the protocol of every record before it).
    package static let protocolName = "pushbridge-protocol"

    /// The headers for records of a notification sent with `providerProtocol` (HTTP/2: none). Made once: they
    /// go on every record of a binary app.
    package static func headers(for providerProtocol: APNSSettings.ProviderProtocol) -> [(String, [UInt8]?)] {
        switch providerProtocol {
        case .http2: []
        case .binary: Self.binary
        }
    }

    private static let binary: [(String, [UInt8]?)] = [
        (protocolName, Array(APNSSettings.ProviderProtocol.binary.rawValue.utf8))
    ]
}
