/// A reason string from an APNs error response body (`{"reason": "..."}`).
///
/// Every reason Apple documents is a case; anything else round-trips through ``unknown(_:)``, so a reason
/// Apple adds tomorrow is reported verbatim instead of being lost (Apple: *Handling notification responses
/// from APNs*).
package enum Reason: Sendable, Hashable {
    // 400
    case badCollapseId
    case badDeviceToken
    case badExpirationDate
    case badMessageId
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    // 400, broadcast channels and channel management (Apple: *Handling error responses from Apple Push
    // Notification service*)
    case badChannelId
    case badRequestParams
    case badRequestPayload
    case cannotCreateChannelConfig
    case channelNotRegistered
    case featureNotEnabled
    case missingChannelId
    case missingPushType
    // 403
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIdInToken
    case badEnvironmentKeyIdInToken
    /// The spelling APNs is reported to send in practice for ``badEnvironmentKeyIdInToken``.
    case badEnvironmentKeyInToken
    /// Broadcast and channel management: the credentials do not cover the bundle ID in the path.
    case topicMismatch
    // 404, 405
    case badPath
    case methodNotAllowed
    // 410
    case expiredToken
    case unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates
    case tooManyRequests
    // 500, 503
    case internalServerError
    case serviceUnavailable
    case shutdown
    /// A reason string this version does not know, kept verbatim.
    case unknown(String)

    /// Every reason Apple documents (everything but ``unknown(_:)``).
    package static let documented: [Reason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed,
        .badChannelId, .badRequestParams, .badRequestPayload, .cannotCreateChannelConfig, .channelNotRegistered,
        .featureNotEnabled, .missingChannelId, .missingPushType,
        .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
        .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken,
        .topicMismatch,
        .badPath, .methodNotAllowed,
        .expiredToken, .unregistered,
        .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests,
        .internalServerError, .serviceUnavailable, .shutdown,
    ]

    private static let byString: [String: Reason] = Dictionary(
        uniqueKeysWithValues: documented.map { ($0.rawValue, $0) }
    )

    /// Parses Apple's reason string; unknown strings become ``unknown(_:)``.
    package init(rawValue: String) {
        self = Self.byString[rawValue] ?? .unknown(rawValue)
    }

    /// Apple's reason string, exactly as it appears in a response body.
    package var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badChannelId: "BadChannelId"
        case .badRequestParams: "BadRequestParams"
        case .badRequestPayload: "BadRequestPayload"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .featureNotEnabled: "FeatureNotEnabled"
        case .missingChannelId: "MissingChannelId"
        case .missingPushType: "MissingPushType"
        case .topicMismatch: "TopicMismatch"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let string): string
        }
    }

    /// The HTTP status APNs answers with this reason; `nil` for an unknown reason.
    package var status: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .badChannelId, .badRequestParams, .badRequestPayload,
            .cannotCreateChannelConfig, .channelNotRegistered, .featureNotEnabled, .missingChannelId, .missingPushType:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken,
            .topicMismatch:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .unknown: nil
        }
    }

    /// Whether this reason says the device token is dead or wrong for good, so it should be published as an
    /// invalid-token record (docs/data-contract.md).
    package var invalidatesToken: Bool {
        switch self {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic: true
        default: false
        }
    }
}

extension Reason: CustomStringConvertible {
    package var description: String { self.rawValue }
}

/// What an APNs answer means for the notification and for the bridge. One classification drives retries,
/// outcomes and halting, so no caller re-derives it from status codes.
package enum Disposition: Sendable, Hashable {
    /// 200: APNs accepted the notification.
    case delivered
    /// A fault of this notification that sending it again cannot fix: the outcome is `rejected`.
    case rejected
    /// A transient fault (429 `TooManyRequests`, 5xx, a timeout, a lost connection): send it again later.
    case retryable
    /// APNs refuses the provider itself (credentials, topic, environment): every other notification would
    /// fail the same way, so the bridge stops the line instead of burning the backlog (docs/operations.md, "Guarantees").
    case systemic
    /// 403 `ExpiredProviderToken`: renew the provider token at once and send the request again.
    case renewToken
}

extension Reason {
    /// How the bridge treats a response with this reason and `status`.
    ///
    /// `status` matters only for ``unknown(_:)`` reasons: an unknown 5xx is retryable, an unknown 403 is
    /// systemic, any other unknown 4xx is a rejection.
    package func disposition(status: Int) -> Disposition {
        switch self {
        case .expiredProviderToken:
            return .renewToken
        case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable, .shutdown,
            .idleTimeout:
            return .retryable
        case .invalidProviderToken, .missingProviderToken, .badCertificate, .badCertificateEnvironment, .forbidden,
            .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken, .topicDisallowed,
            .badTopic, .missingTopic, .badPath, .methodNotAllowed, .topicMismatch:
            return .systemic
        case .featureNotEnabled:
            // Broadcast is not enabled for the app (developer.apple.com): every broadcast of it fails alike.
            return .systemic
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority,
            .deviceTokenNotForTopic, .duplicateHeaders, .invalidPushType, .missingDeviceToken, .payloadEmpty,
            .expiredToken, .unregistered, .payloadTooLarge:
            return .rejected
        case .channelNotRegistered, .badChannelId, .missingChannelId, .badRequestParams, .badRequestPayload,
            .missingPushType, .cannotCreateChannelConfig:
            // An unknown or deleted channel is this notification's fault, not the provider's (issue 15).
            return .rejected
        case .unknown:
            if status >= 500 { return .retryable }
            if status == 403 { return .systemic }
            if status == 429 { return .retryable }
            return .rejected
        }
    }
}
