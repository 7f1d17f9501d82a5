/// The value of the `apns-push-type` header: what kind of notification a request carries.
///
/// Each push type fixes the suffix its `apns-topic` must carry, which priorities it allows, and how large
/// its payload may be (Apple: *Sending notification requests to APNs*).
package enum PushType: String, Sendable, Hashable, CaseIterable, Codable {
    case alert
    case background
    case voip
    case liveactivity
    case location
    case complication
    case fileprovider
    case mdm
    case pushtotalk
    case widgets
    case controls

    /// The suffix Apple requires on the bundle ID in `apns-topic`, or `""` when the bare bundle ID is used.
    ///
    /// `mdm` topics are the UID of the MDM push certificate, so no suffix is ever added to them.
    package var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .voip: ".voip"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// Returns `topic` with this push type's suffix, adding it only when it is missing.
    package func topic(for topic: String) -> String {
        let suffix = self.topicSuffix
        if suffix.isEmpty || topic.hasSuffix(suffix) {
            return topic
        }
        return topic + suffix
    }

    /// The priority used when a route or request names none.
    ///
    /// Apple's default is 10, except for background pushes, which must be sent with 5.
    package var defaultPriority: Priority {
        switch self {
        case .background: .powerConsiderate
        default: .immediate
        }
    }

    /// Whether Apple accepts `priority` for this push type. Background pushes must use 5.
    package func allows(_ priority: Priority) -> Bool {
        switch self {
        case .background: priority != .immediate
        default: true
        }
    }

    /// The largest payload, in bytes, that APNs accepts for this push type.
    package var maxPayloadBytes: Int {
        switch self {
        case .voip: 5120
        default: 4096
        }
    }
}

/// The value of the `apns-priority` header.
package enum Priority: Int, Sendable, Hashable, CaseIterable, Codable {
    /// `1`: prioritise the device's power over everything, never wake it.
    case powerSaving = 1
    /// `5`: deliver in a power-aware way; may be grouped or delayed.
    case powerConsiderate = 5
    /// `10`: deliver immediately.
    case immediate = 10
}
