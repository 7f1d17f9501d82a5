import APNSCore
import Foundation
import Routing
import Testing

/// The example route `order-shipped` of config/pushbridge.yaml.
func orderShippedRoute(
    deviceTokens: String = "{{customer.apns_tokens}}",
    match: [(path: String, value: JSONValue)] = [("type", "shipped")]
) -> RouteSpec {
    RouteSpec(
        name: "order-shipped",
        inputTopic: "orders.shipped",
        match: match,
        deviceTokens: deviceTokens,
        topic: "com.example.shop",
        pushType: "alert",
        priority: 10,
        expiration: "{{expires_at}}",
        collapseID: "order-{{order.id}}",
        payload: [
            "aps": [
                "alert": [
                    "title": "Your order {{order.id}} has shipped",
                    "body": "{{order.carrier}} expects to deliver it {{order.eta}}",
                ],
                "badge": "{{customer.unread_count}}",
                "sound": "default",
            ],
            "order_id": "{{order.id}}",
        ]
    )
}

/// A matching event for ``orderShippedRoute``.
let orderShippedEvent = """
    {"type":"shipped","expires_at":1790000000,
     "order":{"id":"A-1001","carrier":"UPS","eta":"tomorrow"},
     "customer":{"apns_tokens":["aaaa1111","bbbb2222","cccc3333"],"unread_count":3}}
    """

/// A device token of the form APNs accepts (64 hex digits).
let validToken = String(repeating: "0a", count: 32)

/// An event on `topic` carrying `json`.
func event(
    _ json: String,
    topic: String = "orders.shipped",
    offset: Int64 = 42,
    key: String? = "customer-42",
    headers: [(name: String, value: [UInt8])] = []
) -> SourceEvent {
    SourceEvent(
        topic: topic, partition: 3, offset: offset, key: key.map { Array($0.utf8) },
        timestampMilliseconds: 1_700_000_000_123,
        headers: headers, value: Array(json.utf8))
}

/// A router with one route whose payload is `payload` and whose tokens come from `tokens`.
func router(
    payload: JSONValue?,
    deviceTokens: String = "{{token}}",
    configure: (inout RouteSpec) -> Void = { _ in }
) throws -> Router {
    var spec = RouteSpec(
        name: "test", inputTopic: "events", deviceTokens: deviceTokens, topic: "com.example.app", payload: payload)
    configure(&spec)
    return try Router(routes: [spec], epochSeconds: { 1_800_000_000 })
}

/// Maps `json` through `router` and expects notifications; returns them.
func notifications(
    _ router: Router,
    _ json: String,
    topic: String = "events",
    headers: [(name: String, value: [UInt8])] = [],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> [MappedNotification] {
    let mappings = router.map(event: event(json, topic: topic, headers: headers))
    try #require(mappings.count == 1, sourceLocation: sourceLocation)
    guard case .notifications(let notifications) = mappings[0].outcome else {
        Issue.record("expected notifications, got \(mappings[0].outcome)", sourceLocation: sourceLocation)
        return []
    }
    return notifications
}

/// Maps `json` through `router` and expects a dead letter; returns its reason.
func deadLetter(
    _ router: Router,
    _ json: String,
    topic: String = "events",
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> DeadLetterReason? {
    let mappings = router.map(event: event(json, topic: topic))
    try #require(mappings.count == 1, sourceLocation: sourceLocation)
    guard case .deadLetter(let reason) = mappings[0].outcome else {
        Issue.record("expected a dead letter, got \(mappings[0].outcome)", sourceLocation: sourceLocation)
        return nil
    }
    return reason
}

/// The payload of the single notification `router` makes of `json`, parsed by Foundation (which proves it is
/// valid JSON).
func renderedPayload(
    _ router: Router,
    _ json: String,
    headers: [(name: String, value: [UInt8])] = [],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> [String: Any] {
    let mapped = try notifications(router, json, headers: headers, sourceLocation: sourceLocation)
    try #require(mapped.count == 1, sourceLocation: sourceLocation)
    let object = try JSONSerialization.jsonObject(with: Data(mapped[0].notification.payload))
    return try #require(object as? [String: Any], sourceLocation: sourceLocation)
}

/// The payload's text.
func payloadText(_ notification: MappedNotification) -> String {
    String(decoding: notification.notification.payload, as: UTF8.self)
}

/// The compile errors `specs` produce (empty when they compile).
func compileErrors(_ specs: [RouteSpec]) -> [RouteCompileError] {
    do {
        _ = try Router(routes: specs)
        return []
    } catch {
        return error.errors
    }
}
