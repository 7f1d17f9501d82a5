/// `outcomes.key`: what the Kafka key of outcome and invalid-token records is, so that a data team can
/// co-partition them with the table it joins them to (docs/configuration.md, `outcomes`).
package enum OutcomeKey: Sendable, Hashable, CustomStringConvertible {
    /// `device_token` (the default): the device token; a broadcast's outcome, the channel ID.
    case deviceToken
    /// `source_key`: the source event's key bytes (its first 1024 bytes when longer); no key when it had none.
    case sourceKey
    /// `notification_id`: the notification's id, as text.
    case notificationID
    /// `context.<name>`: the value of the route's context entry `<name>` (see ``RecordContext/key(named:)``).
    case context(String)

    /// The values `outcomes.key` takes, as written.
    package static let choices = ["device_token", "source_key", "notification_id", "context.<name>"]

    /// The key as written in the configuration; `nil` when it is none of ``choices``.
    package init?(_ text: String) {
        switch text {
        case "device_token": self = .deviceToken
        case "source_key": self = .sourceKey
        case "notification_id": self = .notificationID
        default:
            guard text.hasPrefix("context.") else { return nil }
            self = .context(String(text.dropFirst("context.".count)))
        }
    }

    /// The key as written in the configuration.
    package var description: String {
        switch self {
        case .deviceToken: "device_token"
        case .sourceKey: "source_key"
        case .notificationID: "notification_id"
        case .context(let name): "context.\(name)"
        }
    }

    /// The longest source key used whole as a record key, in bytes; a longer one is cut to it, so that no event
    /// makes a record too large for Kafka.
    package static let maximumSourceKeyBytes = 1024
}
