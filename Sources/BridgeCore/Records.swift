import Routing
import SafeText

extension SourceCoordinates {
    /// The key as text for JSON records: UTF-8, with invalid sequences replaced by U+FFFD, and at most
    /// ``RecordText/maximumFieldBytes`` of it.
    var keyText: String? {
        self.key.map { RecordText.bounded(String(decoding: $0.prefix(RecordText.maximumFieldBytes), as: UTF8.self)) }
    }
}

/// The final status of one notification in its outcome record (docs/data-contract.md).
package enum OutcomeStatus: String, Sendable, Hashable, CaseIterable {
    /// APNs answered 200.
    case delivered
    /// APNs answered a permanent fault, or the bridge found the same fault before sending.
    case rejected
    /// Retryable answers still failed after `retry.max_attempts`.
    case failed
    /// `apns-expiration` passed before the notification could be sent.
    case expired
    /// A route with `coalesce: true` replaced it, while it waited for its turn, by a newer notification of the
    /// same ordering key; it was never sent. Its record is `pushbridge.outcome.v2` and names the replacement.
    case superseded
}

/// `pushbridge.outcome.v1`: one per notification, keyed by the device token; a broadcast's (keyed by the channel
/// ID) and a superseded one are `pushbridge.outcome.v2`, and one of a route with `context` is `pushbridge.outcome.v3`
/// (docs/data-contract.md).
///
/// Not copyable: the pipeline makes one per notification to encode it, and while the type was copyable the
/// optimiser copied it into a temporary and destroyed the original around the call to ``encoded()``, with either
/// `borrowing` or `consuming` (twelve retains and twenty-four releases per notification, counted with uprobes;
/// docs/benchmarks.md). A noncopyable value can only be borrowed or moved.
package struct OutcomeRecord: ~Copyable, Sendable {
    /// The schema name written into every outcome of a device notification that is not superseded.
    package static let schema = "pushbridge.outcome.v1"
    /// The schema name of a broadcast's outcome and of a superseded one: v1's fields with `device_token`
    /// nullable, the status `superseded`, and `channel_id` and `superseded_by` added (changes of type and of
    /// values, hence a new version; every other outcome stays v1, unchanged).
    package static let schemaV2 = "pushbridge.outcome.v2"
    /// The schema name of an outcome that carries its route's context: v2's fields, then `context` (a field
    /// added, hence a new version; outcomes of routes without `context` stay v1 or v2, unchanged).
    package static let schemaV3 = "pushbridge.outcome.v3"

    package var notificationID: String
    package var route: String
    package var source: SourceCoordinates
    package var deviceToken: String
    package var apnsTopic: String
    package var pushType: String
    package var priority: Int
    package var status: OutcomeStatus
    /// APNs' HTTP status; `nil` when nothing was answered (expired, or a fault found before sending).
    package var httpStatus: Int?
    /// Apple's reason string when not delivered.
    package var reason: String?
    /// `apns-unique-id` (sandbox only).
    package var apnsUniqueID: String?
    /// How many times it was sent (0 when never sent).
    package var attempts: Int
    /// From the first send to the final answer, in milliseconds; `nil` when never sent.
    package var latencyMilliseconds: Double?
    /// When it was first sent, in milliseconds since the epoch; `nil` when never sent.
    package var sentAtEpochMilliseconds: Int64?
    /// When its fate was decided, in milliseconds since the epoch.
    package var completedAtEpochMilliseconds: Int64
    /// The broadcast channel it was sent to; `nil` for a device notification. When set, the record is
    /// ``broadcastSchema`` with `device_token` null, and its key is the channel ID.
    package var channelID: String?
    /// For a `superseded` outcome: the notification id of the newer notification that replaced it.
    package var supersededBy: String?
    /// The route's rendered context (a JSON object's bytes); when set, the record is ``schemaV3``.
    package var context: [UInt8]?

    /// Creates an outcome record.
    package init(
        notificationID: String, route: String, source: SourceCoordinates, deviceToken: String, apnsTopic: String,
        pushType: String, priority: Int, status: OutcomeStatus, httpStatus: Int?, reason: String?,
        apnsUniqueID: String?, attempts: Int, latencyMilliseconds: Double?, sentAtEpochMilliseconds: Int64?,
        completedAtEpochMilliseconds: Int64, channelID: String? = nil, supersededBy: String? = nil,
        context: [UInt8]? = nil
    ) {
        self.context = context
        self.channelID = channelID
        self.supersededBy = supersededBy
        self.notificationID = notificationID
        self.route = route
        self.source = source
        self.deviceToken = deviceToken
        self.apnsTopic = apnsTopic
        self.pushType = pushType
        self.priority = priority
        self.status = status
        self.httpStatus = httpStatus
        self.reason = reason
        self.apnsUniqueID = apnsUniqueID
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
        self.sentAtEpochMilliseconds = sentAtEpochMilliseconds
        self.completedAtEpochMilliseconds = completedAtEpochMilliseconds
    }

    /// The record's Kafka key: the device token, or a broadcast's channel ID (bounded like the value's).
    package var key: [UInt8] { Self.key(deviceToken: self.deviceToken, channelID: self.channelID) }

    /// ``key`` for an outcome of these fields, without making the record.
    static func key(deviceToken: String, channelID: String?) -> [UInt8] {
        Array(RecordText.bounded(channelID ?? deviceToken).utf8)
    }

    /// Whether the record is written as `pushbridge.outcome.v2`: a broadcast's or a superseded outcome.
    package var isV2: Bool { Self.isV2(channelID: self.channelID, status: self.status) }

    private static func isV2(channelID: String?, status: OutcomeStatus) -> Bool {
        channelID != nil || status == .superseded
    }

    /// The record's value: UTF-8 JSON; v2 for a broadcast or a superseded outcome (the same fields in the same
    /// order, `device_token` null for a broadcast, then `channel_id` and `superseded_by` last); with `context`, v3:
    /// v2's fields, then `context`. The one encoder of outcomes: the pipeline makes the record and calls this.
    package borrowing func encoded() -> [UInt8] {
        let isV2 = self.context != nil || Self.isV2(channelID: self.channelID, status: self.status)
        var json = JSONWriter(reservingCapacity: 512 + (self.context?.count ?? 0))
        json.beginObject()
        json.key("schema")
        json.string(self.context != nil ? Self.schemaV3 : isV2 ? Self.schemaV2 : Self.schema)
        json.key("notification_id")
        json.string(self.notificationID)
        json.key("route")
        json.string(self.route)
        json.key("source")
        json.source(self.source)
        json.key("device_token")
        json.string(self.channelID == nil ? RecordText.bounded(self.deviceToken) : nil)
        json.key("apns_topic")
        json.string(RecordText.bounded(self.apnsTopic))
        json.key("push_type")
        json.string(self.pushType)
        json.key("priority")
        json.int(self.priority)
        json.key("status")
        json.string(self.status.rawValue)
        json.key("http_status")
        json.int(self.httpStatus)
        json.key("reason")
        json.string(self.reason.map { RecordText.bounded($0) })
        json.key("apns_unique_id")
        json.string(self.apnsUniqueID.map { RecordText.bounded($0) })
        json.key("attempts")
        json.int(self.attempts)
        json.key("latency_ms")
        json.milliseconds(self.latencyMilliseconds)
        json.key("sent_at")
        json.timestamp(epochMilliseconds: self.sentAtEpochMilliseconds)
        json.key("completed_at")
        json.timestamp(epochMilliseconds: self.completedAtEpochMilliseconds)
        if isV2 {
            json.key("channel_id")
            json.string(self.channelID.map { RecordText.bounded($0) })
            json.key("superseded_by")
            json.string(self.supersededBy)
        }
        if let context = self.context {
            json.key("context")
            json.json(context)
        }
        json.endObject()
        return json.bytes
    }
}

/// `pushbridge.invalid-token.v1`: one per token APNs says is dead, or that is malformed, keyed by the token; one of a
/// route with `context` is `pushbridge.invalid-token.v3`.
package struct InvalidTokenRecord: Sendable, Hashable {
    /// The schema name written into every invalid-token record.
    package static let schema = "pushbridge.invalid-token.v1"
    /// The schema name of a record that carries its route's context: v2's fields, then `context`.
    package static let schemaV3 = "pushbridge.invalid-token.v3"

    package var deviceToken: String
    package var apnsTopic: String
    /// Apple's reason string (`Unregistered`, `ExpiredToken`, `BadDeviceToken`, `DeviceTokenNotForTopic`).
    package var reason: String
    /// From the 410 answer's `timestamp`, in milliseconds since the epoch; otherwise `nil`.
    package var invalidSinceEpochMilliseconds: Int64?
    package var notificationID: String
    package var route: String
    package var source: SourceCoordinates
    /// The route's rendered context (a JSON object's bytes); when set, the record is ``schemaV3``.
    package var context: [UInt8]?

    /// Creates an invalid-token record.
    package init(
        deviceToken: String, apnsTopic: String, reason: String, invalidSinceEpochMilliseconds: Int64?,
        notificationID: String, route: String, source: SourceCoordinates, context: [UInt8]? = nil
    ) {
        self.context = context
        self.deviceToken = deviceToken
        self.apnsTopic = apnsTopic
        self.reason = reason
        self.invalidSinceEpochMilliseconds = invalidSinceEpochMilliseconds
        self.notificationID = notificationID
        self.route = route
        self.source = source
    }

    /// The record's Kafka key: the device token (bounded like the value's `device_token`).
    package var key: [UInt8] { Array(RecordText.bounded(self.deviceToken).utf8) }

    /// The record's value: UTF-8 JSON.
    package func encoded() -> [UInt8] {
        InvalidTokenRecordV2(
            deviceToken: self.deviceToken, apnsTopic: self.apnsTopic, reason: self.reason,
            invalidSinceEpochMilliseconds: self.invalidSinceEpochMilliseconds, notificationID: self.notificationID,
            route: self.route, source: self.source
        ).encoded(schema: self.context == nil ? Self.schema : Self.schemaV3, context: self.context)
    }
}

/// `pushbridge.invalid-token.v2`: v1's fields with `notification_id`, `route` and `source` nullable, for a
/// token no notification of the bridge's found dead: those the binary protocol's feedback service reports
/// (docs/data-contract.md). Records made from APNs' answers stay ``InvalidTokenRecord`` (v1).
package struct InvalidTokenRecordV2: Sendable, Hashable {
    /// The schema name written into every v2 invalid-token record.
    package static let schema = "pushbridge.invalid-token.v2"

    package var deviceToken: String
    package var apnsTopic: String
    /// Apple's reason string; `Unregistered` for the feedback service's tokens.
    package var reason: String
    /// When the token was found invalid, in milliseconds since the epoch (the feedback tuple's time).
    package var invalidSinceEpochMilliseconds: Int64?
    /// `nil` for the feedback service's tokens, as are ``route`` and ``source``.
    package var notificationID: String?
    package var route: String?
    package var source: SourceCoordinates?

    /// Creates a v2 invalid-token record.
    package init(
        deviceToken: String, apnsTopic: String, reason: String, invalidSinceEpochMilliseconds: Int64?,
        notificationID: String? = nil, route: String? = nil, source: SourceCoordinates? = nil
    ) {
        self.deviceToken = deviceToken
        self.apnsTopic = apnsTopic
        self.reason = reason
        self.invalidSinceEpochMilliseconds = invalidSinceEpochMilliseconds
        self.notificationID = notificationID
        self.route = route
        self.source = source
    }

    /// The record's Kafka key: the device token (bounded like the value's `device_token`).
    package var key: [UInt8] { Array(RecordText.bounded(self.deviceToken).utf8) }

    /// The record's value: UTF-8 JSON.
    package func encoded() -> [UInt8] {
        self.encoded(schema: Self.schema)
    }

    /// The fields of both versions, in their order, under `schema`; `null` for what this record lacks (v1 lacks
    /// nothing); then `context` when given (v3).
    func encoded(schema: String, context: [UInt8]? = nil) -> [UInt8] {
        var json = JSONWriter(reservingCapacity: 384 + (context?.count ?? 0))
        json.beginObject()
        json.key("schema")
        json.string(schema)
        json.key("device_token")
        json.string(RecordText.bounded(self.deviceToken))
        json.key("apns_topic")
        json.string(RecordText.bounded(self.apnsTopic))
        json.key("reason")
        json.string(RecordText.bounded(self.reason))
        json.key("invalid_since")
        json.timestamp(epochMilliseconds: self.invalidSinceEpochMilliseconds)
        json.key("notification_id")
        json.string(self.notificationID)
        json.key("route")
        json.string(self.route)
        json.key("source")
        if let source = self.source { json.source(source) } else { json.null() }
        if let context {
            json.key("context")
            json.json(context)
        }
        json.endObject()
        return json.bytes
    }
}

/// A dead letter: the source event's bytes and headers unchanged, plus headers that say why (docs/data-contract.md).
package struct DeadLetter: Sendable, Hashable {
    /// Header names the bridge adds.
    package enum Header {
        package static let error = "pushbridge-error"
        package static let route = "pushbridge-route"
        package static let sourceTopic = "pushbridge-source-topic"
        package static let sourcePartition = "pushbridge-source-partition"
        package static let sourceOffset = "pushbridge-source-offset"
        /// Present only on a dead letter cut to fit a Kafka message: what was cut (`value`, `headers`, `key`).
        package static let truncated = "pushbridge-truncated"
        /// Present with ``truncated``: the source value's size in bytes.
        package static let originalSize = "pushbridge-original-size"
        /// Present when the route has `context`: the context rendered from the event, a JSON object.
        package static let context = RecordContext.deadLetterHeader
    }

    /// A human-readable reason that names the route and the field.
    package var error: String
    /// The route that could not map the event; empty when the event failed before any route (not JSON).
    package var route: String
    package var source: SourceCoordinates
    /// The source event's value, unchanged.
    package var value: [UInt8]?
    /// The source event's headers, unchanged and in order; a `nil` value is a null header and stays one.
    package var sourceHeaders: [(String, [UInt8]?)]
    /// The route's context rendered from the event (a JSON object's bytes), for ``Header/context``; `nil` when the
    /// route has none or no route was reached.
    package var context: [UInt8]?
    /// The source headers `outcomes.forward_headers` forwards (each bounded): kept when a dead letter too large for
    /// Kafka has its source headers dropped.
    package var forwardedHeaders: [(String, [UInt8]?)]

    /// Creates a dead letter.
    package init(
        error: String, route: String, source: SourceCoordinates, value: [UInt8]?, sourceHeaders: [(String, [UInt8]?)],
        context: [UInt8]? = nil, forwardedHeaders: [(String, [UInt8]?)] = []
    ) {
        self.error = error
        self.route = route
        self.source = source
        self.value = value
        self.sourceHeaders = sourceHeaders
        self.context = context
        self.forwardedHeaders = forwardedHeaders
    }

    /// The record's Kafka key: the source event's key.
    package var key: [UInt8]? { self.source.key }

    /// The record's headers: the source headers followed by the `pushbridge-*` headers.
    package var headers: [(String, [UInt8]?)] {
        self.sourceHeaders + self.bridgeHeaders
    }

    /// The error as it goes into `pushbridge-error` and logs: control characters escaped, at most
    /// ``maximumErrorBytes``. Reasons may quote the event, so they are bounded here, whatever made them.
    package var boundedError: String {
        SafeText.excerpt(self.error, maxBytes: Self.maximumErrorBytes)
    }

    /// The longest `pushbridge-error` value, in bytes.
    package static let maximumErrorBytes = 512

    private var bridgeHeaders: [(String, [UInt8]?)] {
        var headers: [(String, [UInt8]?)] = [
            (Header.error, Array(self.boundedError.utf8)),
            (Header.route, Array(self.route.utf8)),
            (Header.sourceTopic, Array(self.source.topic.utf8)),
            (Header.sourcePartition, Array(String(self.source.partition).utf8)),
            (Header.sourceOffset, Array(String(self.source.offset).utf8)),
        ]
        if let context = self.context { headers.append((Header.context, context)) }
        return headers
    }

    /// The dead letter as a record of at most `maxBytes` (key, value and headers, with room for Kafka's
    /// per-record overhead): unchanged when it fits, which is almost always. Otherwise the value is cut,
    /// then, when key and headers alone do not fit, the source headers are dropped (but the forwarded ones, which
    /// are bounded) and the key cut too; the headers `pushbridge-truncated` (what was cut) and
    /// `pushbridge-original-size` (the value's size in bytes) say so (docs/data-contract.md).
    package func record(topic: String, maxBytes: Int) -> OutgoingRecord {
        let budget = max(0, maxBytes - Self.recordOverheadBytes)
        let bridgeHeaders = self.bridgeHeaders
        let valueCount = self.value?.count ?? 0
        let keyCount = self.key?.count ?? 0
        let sourceHeaderBytes = Self.size(of: self.sourceHeaders)
        let fixedBytes = Self.size(of: bridgeHeaders) + Self.truncationHeaderBytes
        if keyCount + valueCount + sourceHeaderBytes + Self.size(of: bridgeHeaders) <= budget {
            return OutgoingRecord(topic: topic, key: self.key, value: self.value, headers: self.headers)
        }
        var cut: [String] = []
        var key = self.key
        var headers = self.sourceHeaders
        if keyCount + sourceHeaderBytes + fixedBytes > budget / 2 {
            // Key and headers would leave less than half the room for the value: keep the value's start
            // instead, which is what a reader of the dead letter needs most.
            headers = self.forwardedHeaders
            cut.append("headers")
            if keyCount > Self.truncatedKeyBytes {
                key = Array(self.key?.prefix(Self.truncatedKeyBytes) ?? [])
                cut.append("key")
            }
        }
        let room = max(0, budget - (key?.count ?? 0) - Self.size(of: headers) - fixedBytes)
        let value = self.value.map { Array($0.prefix(room)) }
        if valueCount > room { cut.insert("value", at: 0) }
        headers += bridgeHeaders
        headers.append((Header.truncated, Array(cut.joined(separator: ",").utf8)))
        headers.append((Header.originalSize, Array(String(valueCount).utf8)))
        return OutgoingRecord(topic: topic, key: key, value: value, headers: headers)
    }

    /// Room left in a record for Kafka's own framing of one record and its headers.
    static let recordOverheadBytes = 512
    /// Room for the two truncation headers.
    static let truncationHeaderBytes = 96
    /// How much of a key is kept when it must be cut.
    static let truncatedKeyBytes = 1024

    private static func size(of headers: [(String, [UInt8]?)]) -> Int {
        headers.reduce(0) { $0 + $1.0.utf8.count + ($1.1?.count ?? 0) + 8 }
    }

    package static func == (lhs: DeadLetter, rhs: DeadLetter) -> Bool {
        lhs.error == rhs.error && lhs.route == rhs.route && lhs.source == rhs.source && lhs.value == rhs.value
            && lhs.sourceHeaders.elementsEqual(rhs.sourceHeaders) { $0.0 == $1.0 && $0.1 == $1.1 }
            && lhs.context == rhs.context
            && lhs.forwardedHeaders.elementsEqual(rhs.forwardedHeaders) { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.error)
        hasher.combine(self.route)
        hasher.combine(self.source)
        hasher.combine(self.value)
    }
}

extension JSONWriter {
    mutating func source(_ source: SourceCoordinates) {
        self.beginObject()
        self.key("topic")
        self.string(source.topic)
        self.key("partition")
        self.int(source.partition)
        self.key("offset")
        self.int(source.offset)
        self.key("key")
        self.sourceKey(source)
        self.endObject()
    }

    /// The event's Kafka key as text (``SourceCoordinates/keyText``). A key of ASCII bytes within the bound is
    /// already what that text would be, so it is escaped straight from its bytes: no `String` made and checked
    /// as UTF-8 for every record.
    private mutating func sourceKey(_ source: SourceCoordinates) {
        guard let key = source.key, key.count <= RecordText.maximumFieldBytes else {
            return self.string(source.keyText)
        }
        let isASCII = key.withUnsafeBufferPointer { bytes in
            var high: UInt8 = 0
            for byte in bytes { high |= byte }
            return high < 0x80
        }
        guard isASCII else { return self.string(source.keyText) }
        self.string(utf8: key)
    }
}

/// Text from events and servers as it goes into records: bounded, so no input makes a record too large for
/// Kafka.
enum RecordText {
    /// The most bytes of one text field copied from an event or a server answer into a record (device token,
    /// APNs topic, reason, source key). Valid values are far shorter; a longer one is cut and ends in `…`.
    static let maximumFieldBytes = 1024

    /// `text`, cut at a character boundary to at most `maxBytes` bytes of UTF-8 (the `…` included) when longer.
    static func bounded(_ text: String, maxBytes: Int = maximumFieldBytes) -> String {
        SafeText.bounded(text, maxBytes: maxBytes)
    }
}
