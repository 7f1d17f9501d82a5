import APNSCore
import Routing

/// What the records made from one event through one route carry besides their fields (docs/data-contract.md,
/// "Context" and "Forwarded headers"): the route's rendered context, the event's forwarded headers, and the key
/// `outcomes.key: context.<name>` takes. Made once per event and route, and only when there is any of it, then
/// shared by every notification of the event's fan-out: a route without `context` and an empty
/// `outcomes.forward_headers` make none, and their records are written exactly as before.
final class RecordExtras: Sendable {
    /// The context object's JSON bytes; `nil` when the route has no `context`.
    let context: [UInt8]?
    /// The forwarded source headers, byte for byte (a dead letter keeps these when it must drop the others).
    let forwarded: [(String, [UInt8]?)]
    /// The headers outcome and invalid-token records carry: ``forwarded``, then
    /// ``Routing/HeaderForwarding/droppedHeader`` when a value was too large to forward.
    let headers: [(String, [UInt8]?)]
    /// The record key for `outcomes.key: context.<name>`; `nil` otherwise, or when the entry is `null`.
    let contextKey: [UInt8]?
    /// What one notification's records hold of these, counted into its room in `kafka.max_in_flight_bytes`: the
    /// context in the outcome and the invalid-token record, and the headers on both.
    let recordBytes: Int

    /// The extras of `mapping`'s records, with the event's `forwarded` headers (``Pipeline/forwardedHeaders(of:)``);
    /// `nil` when the route has no context and nothing is forwarded. A function rather than a failable initializer:
    /// a class's failable initializer allocates its object before it can fail, and this runs for every event.
    static func of(_ mapping: RouteMapping, forwarded: HeaderForwarding.Selection?, key: OutcomeKey) -> RecordExtras? {
        guard mapping.context != nil || forwarded != nil else { return nil }
        return RecordExtras(context: mapping.context, forwarded: forwarded, key: key)
    }

    private init(context: RecordContext?, forwarded: HeaderForwarding.Selection?, key: OutcomeKey) {
        self.context = context?.json
        self.forwarded = forwarded?.forwarded ?? []
        self.headers = forwarded?.recordHeaders ?? []
        if case .context(let name) = key {
            self.contextKey = context?.key(named: name).map(RecordText.boundedKey)
        } else {
            self.contextKey = nil
        }
        self.recordBytes =
            2 * ((self.context?.count ?? 0) + (forwarded?.byteCount ?? 0) + (self.contextKey?.count ?? 0))
    }
}

extension Pipeline {
    /// The event's headers that its records carry (`outcomes.forward_headers`); `nil` when none are forwarded
    /// (nothing configured, or the event has none of them).
    func forwardedHeaders(of event: SourceEvent) -> HeaderForwarding.Selection? {
        guard !self.configuration.forwardHeaders.isEmpty else { return nil }
        let selection = self.configuration.forwardHeaders.select(from: event.headers)
        return selection.forwarded.isEmpty && selection.dropped.isEmpty ? nil : selection
    }

    /// The Kafka key of the outcome (and invalid-token record) of `delivery`, as `outcomes.key` says.
    func outcomeKey(of delivery: Delivery) -> [UInt8]? {
        switch self.configuration.outcomeKey {
        case .deviceToken:
            OutcomeRecord.key(
                deviceToken: delivery.routed.notification.deviceToken,
                channelID: delivery.routed.notification.channelID)
        case .sourceKey:
            delivery.source.key.map(RecordText.boundedKey)
        case .notificationID:
            Array(delivery.routed.notification.apnsID.utf8)
        case .context:
            delivery.extras?.contextKey
        }
    }

    /// The Kafka headers of the outcome and invalid-token records of `delivery`: its app's
    /// (``Pipeline/recordHeaders``), then the forwarded ones.
    func recordHeaders(of delivery: Delivery) -> [(String, [UInt8]?)] {
        let own = self.recordHeaders(delivery.app)
        guard let extras = delivery.extras, !extras.headers.isEmpty else { return own }
        return own.isEmpty ? extras.headers : own + extras.headers
    }
}

extension RecordText {
    /// A record key taken from an event (its key, a context value): its first
    /// ``Routing/OutcomeKey/maximumSourceKeyBytes`` bytes, so that no event makes a record too large for Kafka.
    static func boundedKey(_ key: [UInt8]) -> [UInt8] {
        key.count <= OutcomeKey.maximumSourceKeyBytes ? key : Array(key.prefix(OutcomeKey.maximumSourceKeyBytes))
    }
}
