// Fuzz target: the event parser and the mapper. The input is the value of a Kafka event.
//
// 1. `JSONValue(parsing:)` over the bytes: a document that parses serialises to JSON that parses back to the
//    same value (non-finite doubles, which serialise as `null`, compared as `null`).
// 2. `Router.map(event:)` over a fixed set of routes on the event's topic (the projected parse, matching,
//    fan-out, typed leaves, sections, `payload_from`, `_kafka` and `_headers`): the projected parse rejects
//    exactly what the full parse rejects, and every notification has a JSON object as payload. A notification
//    not rejected locally has header values of visible ASCII and spaces only (issue 11, item 3; the check
//    `header-characters`, see FuzzChecks). A route's context (issue 33) is an object of exactly its entries, within
//    `RecordContext.maximumBytes`, whatever the event, also for a dead letter (the check `context`).
//
// Nothing outlives one input: the router is an immutable constant and every input builds its own event.

import APNSCore
import FuzzSupport
import Routing

let routes: [RouteSpec] = [
    RouteSpec(
        name: "order-shipped",
        inputTopic: "orders",
        match: [("type", "shipped")],
        deviceTokens: "{{customer.apns_tokens}}",
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
            "items": "{{#order.items}}{{qty}}x {{sku}} {{/order.items}}",
            "empty": "{{^order.items}}none{{/order.items}}",
            "total": "{{order.total}}",
            "key": "{{_kafka.key}}",
            "trace": "{{_headers.trace-id}}",
        ],
        context: [
            (name: "campaign", value: "{{campaign.id}}"),
            (name: "label", value: "{{campaign.name}} {{#campaign.tags}}[{{.}}]{{/campaign.tags}}"),
            (name: "order", value: "{{order}}"),
            (name: "trace", value: "{{_headers.trace-id}}"),
            (name: "fixed", value: 1),
        ]
    ),
    RouteSpec(
        name: "any-event",
        inputTopic: "orders",
        deviceTokens: "{{token}}",
        topic: "com.example.shop",
        pushType: "background",
        ttl: .seconds(3600),
        payload: [
            "aps": ["content-available": 1],
            "everything": "{{.}}",
            "tags": "{{#tags}}[{{.}}]{{/tags}}",
            "n": "{{n}}",
            "partition": "{{_kafka.partition}}",
        ]
    ),
    RouteSpec(
        name: "from-event",
        inputTopic: "orders",
        match: [("kind", "raw")],
        deviceTokens: "{{tokens}}",
        topic: "com.example.shop",
        pushType: "liveactivity",
        expiration: "{{expires_at}}",
        payloadFrom: "notification"
    ),
]

let router: Router = {
    do {
        return try Router(routes: routes, epochSeconds: { 1_790_000_000 })
    } catch {
        fatalError("the fuzz routes do not compile: \(error)")
    }
}()

/// `value` with non-finite doubles replaced by `null`, which is how they serialise.
func normalised(_ value: JSONValue) -> JSONValue {
    switch value {
    case .double(let number) where !number.isFinite: .null
    case .array(let elements): .array(elements.map(normalised))
    case .object(let members): .object(members.map { (key: $0.key, value: normalised($0.value)) })
    default: value
    }
}

func isVisibleASCII(_ text: String) -> Bool {
    text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
}

func fuzzOne(_ bytes: [UInt8]) {
    let parsed = try? JSONValue(parsing: bytes)
    if let parsed {
        let text = parsed.serialized()
        guard let again = try? JSONValue(parsing: text) else {
            preconditionFailure("serialised document does not parse: \(String(decoding: text, as: UTF8.self))")
        }
        precondition(again == normalised(parsed), "document changed in a serialisation round trip")
    }

    let event = SourceEvent(
        topic: "orders", partition: 3, offset: 42, key: Array("customer-1".utf8),
        timestampMilliseconds: 1_700_000_000_000, headers: [("trace-id", Array("trace-1".utf8))], value: bytes)
    for mapping in router.map(event: event) {
        if FuzzChecks.enabled("context"), let context = mapping.context {
            guard case .object(let members)? = try? JSONValue(parsing: context.json) else {
                preconditionFailure("route \(mapping.route) made a context that is not a JSON object")
            }
            precondition(members.count == context.fields.count, "a context entry is missing or repeated")
            precondition(context.json.count <= RecordContext.maximumBytes, "a context over its bound")
        }
        switch mapping.outcome {
        case .deadLetter(let reason):
            // An event is unreadable (not JSON, or a number beyond the double range anywhere in it: one dead
            // letter that no route owns) exactly when the full parse rejects it.
            let unreadable = mapping.route.isEmpty
            precondition(!unreadable || reason.code == .notJSON || reason.code == .numberOutOfRange, "\(reason)")
            precondition(unreadable == (parsed == nil), "the projected parse and the full parse disagree: \(reason)")
            _ = reason.description
        case .notifications(let notifications):
            precondition(parsed != nil, "an event the full parse rejects was mapped")
            for mapped in notifications {
                let notification = mapped.notification
                guard case .object? = try? JSONValue(parsing: notification.payload) else {
                    preconditionFailure("route \(mapping.route) made a payload that is not a JSON object")
                }
                let headers = notification.apnsHeaders
                _ = notification.path
                if FuzzChecks.enabled("header-characters"), mapped.localRejection == nil,
                    NotificationValidation.validate(notification) == nil
                {
                    for header in headers {
                        precondition(
                            isVisibleASCII(header.value),
                            "route \(mapping.route) would send \(header.name) with a control or non-ASCII byte")
                    }
                    precondition(
                        isVisibleASCII(notification.deviceToken), "a device token with a control byte is sent")
                }
            }
        }
    }
    _ = router.trial(of: event, route: "from-event")
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzEventParserMain {
        static func main() {
            FuzzDriver.main(target: "FuzzEventParser", fuzzOne)
        }
    }
#endif
