import Foundation

/// The events of the end-to-end benchmark (`make bench`): the `order-shipped` shape of config/pushbridge.yaml, with one device token
/// each from a cycle of ``tokenCount`` tokens (at most ``distinctTokenCount``). The same events go to every server.
///
/// The tokens matter twice. The bridge keys each outcome record by its device token, so the tokens decide how the
/// outcome records spread over the outcome topic's partitions, and librdkafka's mock cluster keeps only about 5 MiB
/// per partition (it drops the oldest records beyond that; ``MockClusterSizing``). And nghttpd answers 200 only for a
/// path it has a file for, so its document root holds one empty file per token.
package struct EventFactory: Sendable {
    /// The most distinct device tokens the events can cycle through.
    package static let distinctTokenCount = 65_536
    /// How many distinct device tokens the events cycle through by default (`BridgeBench --device-tokens`): enough
    /// to spread the outcome records over the outcome topic's partitions (one token for every event put all
    /// outcomes in one partition, the mock dropped all but the newest ~8 500, and the benchmark waited for the rest
    /// until it timed out), and few enough that nghttpd keeps every file open (it caches 2048): with 65 536 files
    /// in its document root nghttpd spent 17.7 µs of CPU per request and was the reference's bottleneck (issue 30).
    package static let defaultTokenCount = 1024

    /// The distinct device tokens this factory's events cycle through.
    package let tokenCount: Int

    /// `expires_at`: a day after the run starts, so nothing expires.
    package let expiresAtEpochSeconds = Int64(Date().timeIntervalSince1970) + 86_400

    /// With more than 0: every event also carries `"activity":{"id":"act-<index % activityCount>"}`, and its device
    /// token is the activity's (one device per activity, as for Live Activity updates), so a route with
    /// `ordering_key: "{{activity.id}}"` has `activityCount` lines (`BridgeBench --ordering-keys`).
    package let activityCount: Int

    /// The factory for a run starting now; `activityCount` as above (0: no activities), the tokens cycling over
    /// `tokenCount` (raised to `activityCount`, so that every activity has a token of its own; at most
    /// ``distinctTokenCount``).
    package init(activityCount: Int = 0, tokenCount: Int = EventFactory.defaultTokenCount) {
        self.activityCount = max(0, activityCount)
        self.tokenCount = min(max(1, tokenCount, self.activityCount), Self.distinctTokenCount)
    }

    /// The `order-shipped` route of config/pushbridge.yaml for `inputTopic`, as the one entry of a `routes:` list
    /// indented by `indent` spaces; `orderingKey` adds `ordering_key` (e.g. `"{{activity.id}}"`).
    package static func route(inputTopic: String, indent: Int, orderingKey: String? = nil) -> String {
        let lines =
            [
                "- name: order-shipped",
                "  input_topic: \(inputTopic)",
                "  match: { type: shipped }",
                "  device_tokens: \"{{customer.apns_tokens}}\"",
                "  topic: com.example.shop",
                "  push_type: alert",
                "  priority: 10",
                "  expiration: \"{{expires_at}}\"",
                "  collapse_id: \"order-{{order.id}}\"",
            ] + (orderingKey.map { ["  ordering_key: \"\($0)\""] } ?? []) + [
                "  payload:",
                "    aps:",
                "      alert:",
                "        title: \"Your order {{order.id}} has shipped\"",
                "        body: \"{{order.carrier}} expects to deliver it {{order.eta}}\"",
                "      badge: \"{{customer.unread_count}}\"",
                "      sound: default",
                "    order_id: \"{{order.id}}\"",
            ]
        let prefix = String(repeating: " ", count: indent)
        return lines.map { prefix + $0 }.joined(separator: "\n")
    }

    /// Event `index`: its Kafka key (distinct per event) and value.
    package func event(_ index: Int) -> (key: [UInt8], value: [UInt8]) {
        let activity = self.activityCount > 0 ? #""activity":{"id":"act-\#(index % self.activityCount)"},"# : ""
        let token = Self.deviceToken(
            self.activityCount > 0 ? index % self.activityCount : index, cycle: self.tokenCount)
        let value =
            #"{"type":"shipped",\#(activity)"order":{"id":\#(100_000 + index),"carrier":"Demo Express","#
            + #""eta":"tomorrow"},"customer":{"apns_tokens":["\#(token)"],"unread_count":\#(index % 5)},"#
            + #""expires_at":\#(self.expiresAtEpochSeconds)}"#
        // Distinct keys spread the events evenly over the partitions (the mock drops the oldest data of a full one).
        return (Array("customer-\(index)".utf8), Array(value.utf8))
    }

    /// The size of an event's value, in bytes.
    package var sampleByteCount: Int { self.event(0).value.count }

    /// The device token of event `index` when the tokens cycle over `cycle`.
    package static func deviceToken(_ index: Int, cycle: Int = EventFactory.distinctTokenCount) -> String {
        self.token(index % max(1, min(cycle, self.distinctTokenCount)))
    }

    /// The distinct device tokens of the first `eventCount` events when the tokens cycle over `cycle`.
    package static func deviceTokens(eventCount: Int, cycle: Int = EventFactory.distinctTokenCount) -> [String] {
        (0..<min(eventCount, cycle, self.distinctTokenCount)).map(self.token)
    }

    /// The distinct device tokens of this factory's first `eventCount` events (nghttpd's document root, h2load's
    /// paths).
    package func deviceTokens(eventCount: Int) -> [String] {
        Self.deviceTokens(eventCount: eventCount, cycle: self.tokenCount)
    }

    /// 64 hex digits, distinct per index.
    static func token(_ index: Int) -> String {
        var state = UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        return (0..<4).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return String(format: "%016llx", z ^ (z >> 31))
        }.joined()
    }
}

/// Topic sizes for librdkafka's mock cluster, which keeps about 5 MiB per partition (`max_size` in librdkafka
/// 2.0.2's `rdkafka_mock.c`, not configurable) and silently drops the oldest records beyond that.
package enum MockClusterSizing {
    /// What the mock keeps of one partition before it drops the oldest records.
    package static let retainedBytesPerPartition = 5 << 20

    /// A generous estimate of one input event with its Kafka overhead, in bytes.
    package static let eventRecordBytes = 400
    /// A generous estimate of one outcome record with its Kafka overhead, in bytes (they are about 620).
    package static let outcomeRecordBytes = 900

    /// Partitions so that each keeps at most ~4 MiB of `records` records of `bytesEach` bytes, when their keys
    /// spread them evenly; at least 4.
    package static func partitionCount(records: Int, bytesEach: Int) -> Int32 {
        Int32(max(4, (records * bytesEach + (4 << 20) - 1) / (4 << 20)))
    }
}
