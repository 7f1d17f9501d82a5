import APNSCore
import Foundation
import PropertyBased
import Routing
import Testing

/// Random JSON documents built from a seeded generator: nested objects and arrays whose leaves include hostile
/// strings, extreme numbers and the fields the routes look for, with the wrong types as often as the right ones.
enum RandomJSON {
    static let strings: [String] = [
        "", "x", "\"", "\\", "\n", "\u{0}", "{{order.id}}", "{{#a}}", "}}", "&amp;", "😀", "東京", "\u{2028}",
        "a\"b\\c",
    ]
    static let keys = [
        "type", "order", "id", "customer", "apns_tokens", "unread_count", "expires_at", "carrier", "eta", "x",
    ]

    static func value(depth: Int, using rng: inout some RandomNumberGenerator) -> JSONValue {
        let choice = Int.random(in: 0..<(depth > 3 ? 7 : 10), using: &rng)
        switch choice {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2:
            return .integer(
                [0, -1, .max, .min, Int64.random(in: -1000...1000, using: &rng)].randomElement(using: &rng)!)
        case 3:
            return .double(
                [0.5, -1e300, 1e-300, Double.random(in: -1e6...1e6, using: &rng)].randomElement(using: &rng)!)
        case 4, 5, 6: return .string(self.strings.randomElement(using: &rng)!)
        case 7:
            return .array(
                (0..<Int.random(in: 0...4, using: &rng)).map { _ in self.value(depth: depth + 1, using: &rng) })
        default:
            return .object(
                (0..<Int.random(in: 0...5, using: &rng)).map { _ in
                    (key: self.keys.randomElement(using: &rng)!, value: self.value(depth: depth + 1, using: &rng))
                })
        }
    }

    /// A generator of event bodies: mostly objects, sometimes other JSON, sometimes broken text.
    static let events = Generator<[UInt8], Shrink.None<[UInt8]>>(run: { rng in
        var document = RandomJSON.value(depth: 0, using: &rng)
        if Bool.random(using: &rng) {
            document = .object(
                [(key: "type", value: "shipped")] + [(key: "customer", value: RandomJSON.value(depth: 1, using: &rng))])
        }
        var bytes = document.serialized()
        if Int.random(in: 0..<8, using: &rng) == 0, !bytes.isEmpty {
            bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
        }
        return bytes
    })
}

@Suite struct MapperPropertyTests {
    static let router: Router = {
        var background = RouteSpec(
            name: "everything", inputTopic: "orders.shipped", deviceTokens: "{{customer.apns_tokens}}",
            topic: "com.example.shop", pushType: "background", expiration: "{{expires_at}}",
            payload: [
                "aps": ["content-available": 1], "echo": "{{.}}", "text": "{{#order}}{{id}}: {{carrier}}{{/order}}",
            ])
        background.collapseID = "{{order.id}}"
        return try! Router(routes: [orderShippedRoute(match: []), background])
    }()

    @Test func randomEventsGiveValidJSONNotificationsOrADeadLetterReason() async {
        await propertyCheck(count: 400, input: RandomJSON.events) { bytes in
            let mappings = Self.router.map(
                event: SourceEvent(topic: "orders.shipped", partition: 0, offset: 1, value: bytes))
            // Both routes match everything; an event no route can read is one dead letter that no route owns.
            let unreadable = mappings.count == 1 && mappings[0].route.isEmpty
            #expect(mappings.count == 2 || unreadable)
            for mapping in mappings {
                switch mapping.outcome {
                case .notifications(let mapped):
                    #expect(!mapped.isEmpty)
                    for notification in mapped {
                        let object = try? JSONSerialization.jsonObject(with: Data(notification.notification.payload))
                        #expect(object is [String: Any], "\(payloadText(notification))")
                    }
                case .deadLetter(let reason):
                    #expect(reason.route == mapping.route)
                    #expect(!reason.message.isEmpty)
                }
            }
        }
    }

    @Test func parsingTheSerialisedFormGivesTheSameValue() async {
        let values = Generator<JSONValue, Shrink.None<JSONValue>>(run: { rng in
            RandomJSON.value(depth: 0, using: &rng)
        })
        await propertyCheck(count: 300, input: values) { value in
            let reparsed = try? JSONValue(parsing: value.serialized())
            #expect(reparsed == value)
        }
    }

    @Test func mappingTheSameEventTwiceGivesTheSameNotifications() async {
        await propertyCheck(count: 200, input: RandomJSON.events, Gen.int64(in: 0...1_000_000)) { bytes, offset in
            let event = SourceEvent(topic: "orders.shipped", partition: 2, offset: offset, value: bytes)
            let first = Self.router.map(event: event).map(Self.summary)
            let second = Self.router.map(event: event).map(Self.summary)
            #expect(first == second)
        }
    }

    @Test func mappingBuildsOnlyWhatRoutesReadYetAnswersLikeAFullParse() async {
        await propertyCheck(count: 300, input: RandomJSON.events) { bytes in
            let event = SourceEvent(topic: "orders.shipped", partition: 2, offset: 9, value: bytes)
            let mapped = Self.router.map(event: event).map(Self.summary)
            var full = Self.router.routes(forTopic: "orders.shipped").compactMap { route -> String? in
                guard case .mapped(let mapping)? = Self.router.trial(of: event, route: route) else { return nil }
                return Self.summary(mapping)
            }
            // Unreadable: each route's trial answers the same single dead letter.
            if Set(full).count == 1, mapped.count == 1 { full = Array(full.prefix(1)) }
            #expect(mapped == full)
        }
    }

    static func summary(_ mapping: RouteMapping) -> String {
        switch mapping.outcome {
        case .deadLetter(let reason): return reason.description
        case .notifications(let mapped):
            return mapped.map { "\($0.notification.id) \($0.notification.deviceToken) \(payloadText($0))" }.joined(
                separator: "|")
        }
    }
}
