import APNSCore
import BridgeCore
import Configuration

/// A notification sender with a lifecycle: connections to close on shutdown, and a local check of each
/// notification before it is sent.
package protocol ManagedSender: NotificationSender {
    /// APNs connections open now (`pushbridge_apns_connections`).
    var openConnections: Int { get }
    /// A fault Apple would reject `notification` for, found without sending it; `nil` when none.
    /// `payloadIsJSONObject`: the payload is known to be a JSON object (see ``Routing/MappedNotification``); `app`: the
    /// app it goes to (`nil`: the default block), whose protocol decides the rules.
    func validate(_ notification: Notification, payloadIsJSONObject: Bool, app: String?) -> Reason?
    /// The provider protocol `app`'s notifications go out on, for the `pushbridge-protocol` header of their
    /// records (senders that are no APNs protocol, like the log sender, answer `.http2`: no header).
    func providerProtocol(app: String?) -> APNSSettings.ProviderProtocol
    /// Whether ``providerProtocol(app:)`` answers `.http2` for every app: then the pipeline need not ask it per
    /// record (it is asked on the answer's thread for every outcome).
    var sendsOnlyHTTP2: Bool { get }
    /// Runs the connections and the sends that need waiting until ``shutdown()``.
    func run() async
    /// Closes connections and ends ``run()``; called after the pipeline drained.
    func shutdown() async
}

extension LogSender: ManagedSender {
    package var openConnections: Int { 0 }
    package func validate(_ notification: Notification, payloadIsJSONObject: Bool, app: String?) -> Reason? { nil }
    package func providerProtocol(app: String?) -> APNSSettings.ProviderProtocol { .http2 }
    package var sendsOnlyHTTP2: Bool { true }
    package func run() async {}
    package func shutdown() async {}
}
