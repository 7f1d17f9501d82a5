import APNSCore
import Configuration
import Foundation
import NIOCore
import NIOPosix
import Routing

/// `pushbridge doctor`'s checks: what usually goes wrong in production, each found and explained with a fix.
///
/// For the `apns` block and every app under `apps`: credentials parse, the certificate's validity, environment
/// and topics, TCP, verified TLS with ALPN `h2` and the server's SETTINGS, whether APNs accepts the provider
/// token (or certificate), and the clock against the server's `date`. Then Kafka: reachable, and every input and
/// result topic present. Nothing is delivered: the probe request goes to an all-zero device token.
package struct Doctor: Sendable {
    /// Timeouts and thresholds.
    package struct Options: Sendable {
        /// How long the Kafka metadata request may take.
        package var kafkaTimeout: Duration
        /// How long connecting to APNs (TCP, TLS, SETTINGS) and the probe request may take, each.
        package var apnsTimeout: Duration
        /// A certificate expiring sooner than this is a warning.
        package var certificateExpiryWarning: Duration
        /// Clock skew above this is a warning.
        package var clockSkewWarning: Duration
        /// Clock skew above this is a failure.
        package var clockSkewFailure: Duration

        /// The documented defaults: 10 s timeouts, 30 days, 1 minute, 10 minutes.
        package init(
            kafkaTimeout: Duration = .seconds(10),
            apnsTimeout: Duration = .seconds(10),
            certificateExpiryWarning: Duration = .seconds(30 * 86_400),
            clockSkewWarning: Duration = .seconds(60),
            clockSkewFailure: Duration = .seconds(600)
        ) {
            self.kafkaTimeout = kafkaTimeout
            self.apnsTimeout = apnsTimeout
            self.certificateExpiryWarning = certificateExpiryWarning
            self.clockSkewWarning = clockSkewWarning
            self.clockSkewFailure = clockSkewFailure
        }
    }

    /// The device token of the probe request: valid hex, never issued by Apple, so APNs answers `BadDeviceToken`
    /// after it has checked the credentials.
    package static let probeDeviceToken = String(repeating: "0", count: 64)

    /// The probe notification to `topic`: an alert to ``probeDeviceToken`` with an empty `aps`, priority 5, expiring
    /// at once (`apns-expiration: 0`), so that nothing is stored or delivered.
    static func probeNotification(topic: String) -> APNSCore.Notification {
        APNSCore.Notification(
            deviceToken: Self.probeDeviceToken, topic: topic, pushType: .alert, priority: .powerConsiderate,
            expirationEpochSeconds: 0, id: UUID(), payload: Array(#"{"aps":{}}"#.utf8))
    }

    /// The configuration checked.
    package let configuration: BridgeConfiguration
    /// Timeouts and thresholds.
    package let options: Options
    let clock: any WallClock
    let eventLoopGroup: any EventLoopGroup

    /// Creates a doctor for `configuration`; `clock` is the local clock compared with the servers'.
    package init(
        configuration: BridgeConfiguration,
        options: Options = Options(),
        clock: any WallClock = SystemWallClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.options = options
        self.clock = clock
        self.eventLoopGroup = eventLoopGroup
    }

    /// Runs every check, in order: each APNs provider (`apns`, then `apps` by name), then Kafka.
    package func run() async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        checks += await self.checkAPNS(self.configuration.apns, scope: "apns", app: nil)
        checks += await self.checkChannels(self.configuration.apns, scope: "apns", app: nil)
        for name in self.configuration.apps.keys.sorted() {
            checks += await self.checkAPNS(self.configuration.apps[name]!, scope: "apps.\(name)", app: name)
            checks += await self.checkChannels(self.configuration.apps[name]!, scope: "apps.\(name)", app: name)
        }
        checks += await self.checkKafka()
        checks += self.checkKafkaTLS()
        return checks
    }

    /// The bundle ID a route sends to (its topic without the push type's suffix).
    static func bundleID(of route: RouteSpec) -> String {
        guard let pushType = PushType(rawValue: route.pushType), !pushType.topicSuffix.isEmpty,
            route.topic.hasSuffix(pushType.topicSuffix)
        else { return route.topic }
        return String(route.topic.dropLast(pushType.topicSuffix.count))
    }

    /// `duration` as the output writes it: milliseconds, seconds or minutes.
    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return self.text(seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// `seconds` as the output writes them.
    static func text(seconds: Double) -> String {
        if seconds < 1 { return "\(Int(seconds * 1000)) ms" }
        if seconds < 120 { return "\(Int(seconds)) s" }
        return "\(Int(seconds / 60)) min"
    }
}
