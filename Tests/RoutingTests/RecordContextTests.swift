import Foundation
import Routing
import Testing

// A route's `context` (docs/configuration.md, "Context on records"): rendered once per event, never failing, never
// touching the notification.

@Suite struct RecordContextTests {
    /// The `promo` route: a constant payload, so every field the context reads is read by the context alone.
    static func promoRouter(_ context: [(name: String, value: JSONValue)]) throws -> Router {
        try router(payload: ["aps": ["alert": "Sale"]]) { $0.context = context }
    }

    static func context(of mapping: RouteMapping?) throws -> (json: String, fields: [RecordContext.Field]) {
        let context = try #require(mapping?.context)
        return (String(decoding: context.json, as: UTF8.self), context.fields)
    }

    @Test func entriesRenderWithTheirJSONTypesInTheOrderWritten() throws {
        let router = try Self.promoRouter([
            (name: "campaign", value: "{{campaign.id}}"),
            (name: "user", value: "{{user.id}}"),
            (name: "label", value: "{{campaign.name}} ({{campaign.id}})"),
            (name: "tags", value: "{{campaign.tags}}"),
            (name: "source", value: "{{_kafka.topic}}/{{_kafka.offset}}"),
            (name: "trace", value: "{{_headers.traceparent}}"),
            (name: "team", value: "growth"),
            (name: "version", value: 3),
        ])
        let mapping = router.map(
            event: event(
                #"{"token":"aa","campaign":{"id":1234,"name":"Spring \"sale\"","tags":["a","b"]},"user":{"id":"u-7"}}"#,
                topic: "events", headers: [(name: "traceparent", value: Array("00-abc-01".utf8))])
        ).first
        let (json, _) = try Self.context(of: mapping)
        #expect(
            json
                == #"{"campaign":1234,"user":"u-7","label":"Spring \"sale\" (1234)","tags":["a","b"],"source":"events/42","trace":"00-abc-01","team":"growth","version":3}"#
        )
    }

    @Test func aMissingOrNullValueIsNullAndTheNotificationIsUnharmed() throws {
        let context: [(name: String, value: JSONValue)] = [
            (name: "campaign", value: "{{campaign.id}}"),
            (name: "user", value: "{{user.id}}"),
            (name: "label", value: "user {{user.id}}"),
        ]
        let with = try Self.promoRouter(context)
        let without = try Self.promoRouter([])
        let json = #"{"token":"aa","campaign":{"id":null}}"#
        let mapping = try #require(with.map(event: event(json, topic: "events")).first)
        let (text, fields) = try Self.context(of: mapping)
        #expect(text == #"{"campaign":null,"user":null,"label":null}"#)
        #expect(fields.map(\.nullReason) == ["campaign.id is null", "user.id is missing", "user.id is missing"])
        let mapped = try notifications(with, json)
        let plain = try notifications(without, json)
        #expect(mapped.map(\.notification) == plain.map(\.notification))
        #expect(mapped.map(\.localRejection) == [nil])
    }

    @Test func aValueOverTheBoundIsNull() throws {
        let limit = RecordContext.maximumValueBytes
        let router = try Self.promoRouter([
            (name: "long", value: "{{long}}"),
            (name: "escaped", value: "{{quotes}}"),
            (name: "text", value: "x{{long}}"),
            (name: "object", value: "{{big}}"),
            (name: "fits", value: "{{fits}}"),
        ])
        let long = String(repeating: "a", count: limit + 1)
        // 600 quotes fit the raw bound but not once escaped (1200 bytes plus the quotes).
        let quotes = String(repeating: "\\\"", count: 600)
        let big = "[" + Array(repeating: "12345", count: 300).joined(separator: ",") + "]"
        let fits = String(repeating: "b", count: limit - 2)
        let json = #"{"token":"aa","long":"\#(long)","quotes":"\#(quotes)","big":\#(big),"fits":"\#(fits)"}"#
        let mapping = router.map(event: event(json, topic: "events")).first
        let (text, fields) = try Self.context(of: mapping)
        #expect(text == #"{"long":null,"escaped":null,"text":null,"object":null,"fits":"\#(fits)"}"#)
        #expect(fields.prefix(4).allSatisfy { $0.nullReason?.contains("at most \(limit)") == true }, "\(fields)")
        #expect(fields[1].nullReason == "rendered 1202 bytes as JSON; a context entry is at most \(limit)")
        let mapped = try notifications(router, json)
        #expect(mapped.count == 1)
        #expect(mapped.first?.localRejection == nil)
    }

    @Test func theContextObjectIsBoundedWhateverTheEvent() throws {
        let entries = (0..<RecordContext.maximumEntries).map { index in
            (
                name: String(repeating: "n", count: RecordContext.maximumNameBytes - 2) + String(format: "%02d", index),
                value: JSONValue.string("{{v}}")
            )
        }
        let router = try Self.promoRouter(entries)
        let value = String(repeating: "v", count: RecordContext.maximumValueBytes - 2)
        let mapping = router.map(event: event(#"{"token":"aa","v":"\#(value)"}"#, topic: "events")).first
        let context = try #require(mapping?.context)
        #expect(context.json.count == RecordContext.maximumBytes - 1)  // no comma after the last member
        #expect(context.fields.allSatisfy { $0.value != nil })
    }

    @Test func aDeadLetterOfAReadableEventCarriesTheContext() throws {
        let router = try Self.promoRouter([(name: "campaign", value: "{{campaign}}")])
        let mapping = try #require(router.map(event: event(#"{"campaign":"c-1"}"#, topic: "events")).first)
        guard case .deadLetter(let reason) = mapping.outcome else {
            Issue.record("expected a dead letter")
            return
        }
        #expect(reason.field == "device_tokens")
        #expect(mapping.context.map { String(decoding: $0.json, as: UTF8.self) } == #"{"campaign":"c-1"}"#)
    }

    @Test func anEventThatIsNotJSONHasNoContext() throws {
        let router = try Self.promoRouter([(name: "campaign", value: "{{campaign}}")])
        let mapping = try #require(router.map(event: event("not JSON", topic: "events")).first)
        #expect(mapping.route.isEmpty)
        #expect(mapping.context == nil)
    }

    @Test func aRouteWithoutContextMapsNone() throws {
        let mapping = try Self.promoRouter([]).map(event: event(#"{"token":"aa"}"#, topic: "events")).first
        #expect(mapping != nil)
        #expect(mapping?.context == nil)
    }

    @Test func theRecordKeyOfAnEntryIsItsTextOrJSON() throws {
        let router = try Self.promoRouter([
            (name: "text", value: "{{s}}"), (name: "number", value: "{{n}}"), (name: "object", value: "{{o}}"),
            (name: "missing", value: "{{nothing}}"),
        ])
        let context = try #require(
            router.map(event: event(#"{"token":"aa","s":"café","n":12,"o":{"a":[1]}}"#, topic: "events")).first?
                .context)
        #expect(context.key(named: "text") == Array("café".utf8))
        #expect(context.key(named: "number") == Array("12".utf8))
        #expect(context.key(named: "object") == Array(#"{"a":[1]}"#.utf8))
        #expect(context.key(named: "missing") == nil)
        #expect(context.key(named: "not-an-entry") == nil)
    }

    // MARK: Compile errors

    @Test func moreEntriesThanTheBoundIsAnError() {
        let entries = (0...RecordContext.maximumEntries).map { (name: "e\($0)", value: JSONValue.string("{{a}}")) }
        let errors = compileErrors(RouteCompileTests.base { $0.context = entries })
        #expect(errors.map(\.keyPath) == ["context"])
        #expect(errors.first?.message == "context has 17 entries; a route may have at most 16")
    }

    @Test(arguments: [
        ("", "an entry has an empty name"),
        ("a.b", #""a.b" is not a valid context name"#),
        ("with space", #""with space" is not a valid context name"#),
        (String(repeating: "x", count: 65), "the name is 65 bytes; at most 64"),
    ])
    func aBadNameIsAnError(name: String, message: String) {
        let errors = compileErrors(RouteCompileTests.base { $0.context = [(name: name, value: "{{a}}")] })
        #expect(errors.map(\.keyPath) == ["context.\(name)"])
        #expect(errors.map(\.message) == [message])
    }

    @Test func aMappingOrListValueIsAnErrorWithTheFix() {
        let errors = compileErrors(
            RouteCompileTests.base { $0.context = [(name: "a", value: ["x": 1]), (name: "b", value: [1, 2])] })
        #expect(errors.map(\.keyPath) == ["context.a", "context.b"])
        #expect(errors.first?.message == "the entry is an object; a context entry is one value")
        #expect(errors.first?.hint?.contains("{{order.items}}") == true)
    }

    @Test func aBrokenTemplateOrAnOversizedConstantIsAnError() {
        let errors = compileErrors(
            RouteCompileTests.base {
                $0.context = [
                    (name: "a", value: "{{campaign"),
                    (name: "b", value: .string(String(repeating: "z", count: RecordContext.maximumValueBytes))),
                    (name: "a", value: "{{x}}"),
                ]
            })
        #expect(errors.map(\.code) == [.brokenTemplate, .invalidValue, .invalidValue])
        #expect(errors.map(\.keyPath) == ["context.a", "context.b", "context.a"])
        #expect(errors.last?.message == "the name a is used twice")
    }
}

@Suite struct HeaderForwardingTests {
    let forwarding = HeaderForwarding(names: ["traceparent", "tracestate", "x-correlation-id"])

    @Test func theLastHeaderOfEachNameIsForwardedByteForByteInTheOrderOfTheNames() {
        let headers: [(String, [UInt8]?)] = [
            ("x-correlation-id", [0xFF, 0x00, 0xC3]),
            ("traceparent", Array("old".utf8)),
            ("other", Array("x".utf8)),
            ("traceparent", Array("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".utf8)),
            ("Tracestate", Array("case differs".utf8)),
        ]
        let selection = self.forwarding.select(from: headers)
        #expect(selection.forwarded.map { $0.0 } == ["traceparent", "x-correlation-id"])
        #expect(selection.forwarded.map { $0.1 } == [headers[3].1, [0xFF, 0x00, 0xC3]])
        #expect(selection.dropped.isEmpty)
        #expect(selection.recordHeaders.map { $0.0 } == ["traceparent", "x-correlation-id"])
    }

    @Test func aNullOrEmptyHeaderStaysAsItIs() {
        let selection = self.forwarding.select(from: [("tracestate", nil), ("traceparent", [])])
        #expect(selection.forwarded.map { $0.0 } == ["traceparent", "tracestate"])
        #expect(selection.forwarded.map { $0.1 } == [[], nil])
    }

    @Test func aValueOverTheBoundIsNotForwardedAndTheRecordNamesIt() {
        let huge = [UInt8](repeating: 0x41, count: 1 << 20)
        let selection = self.forwarding.select(from: [
            ("traceparent", huge), ("tracestate", [UInt8](repeating: 0x42, count: HeaderForwarding.maximumValueBytes)),
            ("x-correlation-id", [UInt8](repeating: 0x43, count: HeaderForwarding.maximumValueBytes + 1)),
        ])
        #expect(selection.forwarded.map { $0.0 } == ["tracestate"])
        #expect(selection.dropped == ["traceparent", "x-correlation-id"])
        #expect(selection.recordHeaders.last?.0 == HeaderForwarding.droppedHeader)
        #expect(selection.recordHeaders.last?.1 == Array("traceparent,x-correlation-id".utf8))
        #expect(selection.byteCount < 2 * HeaderForwarding.maximumValueBytes)
    }

    @Test func anEventWithoutTheHeadersForwardsNothing() {
        let selection = self.forwarding.select(from: [("other", [1])])
        #expect(selection.forwarded.isEmpty)
        #expect(selection.recordHeaders.isEmpty)
    }

    @Test func outcomeKeysParseAsWritten() {
        #expect(OutcomeKey("device_token") == .deviceToken)
        #expect(OutcomeKey("source_key") == .sourceKey)
        #expect(OutcomeKey("notification_id") == .notificationID)
        #expect(OutcomeKey("context.campaign") == .context("campaign"))
        #expect(OutcomeKey("device-token") == nil)
        #expect(OutcomeKey.context("campaign").description == "context.campaign")
    }
}
