// Fuzz target: template compile + render. The input is `TEMPLATE \0 EVENT`: the bytes before the first zero
// byte are template text, the bytes after it the event's JSON value (none: a fixed event).
//
// The template text is compiled in four places, each as its own route (a route that does not compile is
// skipped; its errors are formatted, as `pushbridge validate` would print them):
// - a payload text leaf, and a leaf that is exactly the text (typed when it is one tag);
// - the whole payload, when the text is a JSON object (a structured template, as YAML would give it);
// - `collapse_id`;
// - `device_tokens`.
// Every route that compiles maps the event: the payload of every notification is a JSON object, and one that
// is not rejected locally has header values of visible ASCII and spaces only (the check `header-characters`,
// issue 11, item 3).
//
// Nothing outlives one input: every input compiles its own routers.

import APNSCore
import FuzzSupport
import Routing

let fixedEvent = Array(
    """
    {"type":"shipped","expires_at":1790000000,"token":"\(String(repeating: "ab", count: 32))",\
    "order":{"id":"A-1","carrier":"UPS","eta":"tomorrow","gift":true,\
    "items":[{"sku":"S-1","qty":1},{"sku":"S-2","qty":2.5}],"total":{"amount":129.95,"currency":"EUR"}},\
    "tags":["a","b",null,1,{"x":[]}],"n":-9223372036854775808,"big":1e308,"deep":[[[[{"a":[{}]}]]]],\
    "customer":{"apns_tokens":["\(String(repeating: "0f", count: 32))","\(String(repeating: "A1", count: 40))"],\
    "unread_count":3}}
    """.utf8)

/// The device token: the event's key, so that every variant has a token whatever the event (a route's
/// `device_tokens` must be a template).
let token = String(repeating: "ab", count: 32)

func isVisibleASCII(_ text: String) -> Bool {
    text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
}

func routeVariants(_ template: String) -> [RouteSpec] {
    var variants = [
        RouteSpec(
            name: "leaf", inputTopic: "t", deviceTokens: "{{_kafka.key}}", topic: "com.example.app",
            payload: ["aps": ["alert": ["body": .string("prefix " + template)]], "typed": .string(template)]),
        RouteSpec(
            name: "collapse", inputTopic: "t", deviceTokens: "{{_kafka.key}}", topic: "com.example.app",
            collapseID: template, payload: ["aps": ["alert": "x"]]),
        RouteSpec(
            name: "tokens", inputTopic: "t", deviceTokens: template, topic: "com.example.app",
            payload: ["aps": ["alert": "x"]]),
    ]
    if case .object? = try? JSONValue(parsing: template) {
        variants.append(
            RouteSpec(
                name: "structured", inputTopic: "t", deviceTokens: "{{_kafka.key}}", topic: "com.example.app",
                pushType: "background", payload: try? JSONValue(parsing: template)))
    }
    return variants
}

func fuzzOne(_ bytes: [UInt8]) {
    let split = bytes.firstIndex(of: 0)
    let template = String(decoding: bytes[..<(split ?? bytes.endIndex)], as: UTF8.self)
    let value = split.map { Array(bytes[($0 + 1)...]) } ?? fixedEvent
    let event = SourceEvent(
        topic: "t", partition: 0, offset: 7, key: Array(token.utf8), timestampMilliseconds: 1_700_000_000_000,
        headers: [("h", Array("v".utf8)), ("x.y", [0xFF, 0x0A])], value: value)

    for spec in routeVariants(template) {
        let router: Router
        do {
            router = try Router(routes: [spec], epochSeconds: { 1_790_000_000 })
        } catch {
            for problem in error.errors {
                _ = problem.description
            }
            continue
        }
        for mapping in router.map(event: event) {
            guard case .notifications(let notifications) = mapping.outcome else { continue }
            for mapped in notifications {
                let notification = mapped.notification
                // A payload past its limit is cut where rendering stopped (the render budget) and never sent:
                // only a notification that could be sent must carry a JSON object.
                if mapped.localRejection == .payloadTooLarge {
                    precondition(
                        notification.payload.count <= notification.pushType.maxPayloadBytes + 1,
                        "route \(spec.name) rendered past its budget: \(notification.payload.count) bytes")
                    continue
                }
                guard case .object? = try? JSONValue(parsing: notification.payload) else {
                    preconditionFailure("route \(spec.name) made a payload that is not a JSON object")
                }
                if FuzzChecks.enabled("header-characters"), mapped.localRejection == nil,
                    NotificationValidation.validate(notification) == nil
                {
                    for header in notification.apnsHeaders {
                        precondition(
                            isVisibleASCII(header.value),
                            "route \(spec.name) would send \(header.name) with a control or non-ASCII byte")
                    }
                }
            }
        }
    }
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzTemplateMain {
        static func main() {
            FuzzDriver.main(target: "FuzzTemplate", fuzzOne)
        }
    }
#endif
