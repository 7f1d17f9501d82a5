import Foundation
import Routing
import Testing

@testable import BridgeCore

/// Records of a route with `context`, and dead letters with forwarded headers (docs/data-contract.md, "Context").
@Suite("Records with context")
struct ContextRecordsTests {
    let source = SourceCoordinates(topic: "orders", partition: 1, offset: 9, key: Array("customer-42".utf8))
    let context = Array(#"{"campaign":"spring","user":null}"#.utf8)

    func outcome(context: [UInt8]?, channelID: String? = nil) -> OutcomeRecord {
        OutcomeRecord(
            notificationID: "8b4c2a1e-0000-5000-8000-000000000000", route: "promo", source: self.source,
            deviceToken: String(repeating: "ab", count: 32), apnsTopic: "com.example.shop", pushType: "alert",
            priority: 10, status: .delivered, httpStatus: 200, reason: nil, apnsUniqueID: nil, attempts: 1,
            latencyMilliseconds: 3, sentAtEpochMilliseconds: 1_000, completedAtEpochMilliseconds: 1_003,
            channelID: channelID, context: context)
    }

    @Test("an outcome with context is v3: v2's fields in v2's order, then the context object as rendered")
    func outcomeWithContextIsV3() throws {
        let plain = String(decoding: self.outcome(context: nil).encoded(), as: UTF8.self)
        let json = String(decoding: self.outcome(context: self.context).encoded(), as: UTF8.self)
        #expect(json.hasPrefix(#"{"schema":"pushbridge.outcome.v3","#))
        #expect(
            json.hasSuffix(#","channel_id":null,"superseded_by":null,"context":{"campaign":"spring","user":null}}"#))
        // Between the schema name and v2's fields, the same bytes as the record without context.
        let v1Fields = plain.dropFirst(#"{"schema":"pushbridge.outcome.v1""#.count).dropLast()
        #expect(json.contains(v1Fields))
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect((object["context"] as? [String: Any])?["campaign"] as? String == "spring")
    }

    @Test("a broadcast's outcome with context is v3 with its channel")
    func broadcastWithContext() {
        let json = String(
            decoding: self.outcome(context: self.context, channelID: "dHN0LXNyY2gtY2hubA==").encoded(), as: UTF8.self)
        #expect(json.hasPrefix(#"{"schema":"pushbridge.outcome.v3","#))
        #expect(json.contains(#""device_token":null,"#))
        #expect(json.contains(#""channel_id":"dHN0LXNyY2gtY2hubA==","superseded_by":null,"context":{"#))
    }

    @Test("an invalid-token record with context is v3: v1's fields, then the context")
    func invalidTokenWithContextIsV3() {
        var record = InvalidTokenRecord(
            deviceToken: "ab", apnsTopic: "com.example.shop", reason: "Unregistered",
            invalidSinceEpochMilliseconds: nil,
            notificationID: "8b4c2a1e-0000-5000-8000-000000000000", route: "promo", source: self.source)
        let plain = String(decoding: record.encoded(), as: UTF8.self)
        record.context = self.context
        let json = String(decoding: record.encoded(), as: UTF8.self)
        #expect(plain.hasPrefix(#"{"schema":"pushbridge.invalid-token.v1","#))
        #expect(json.hasPrefix(#"{"schema":"pushbridge.invalid-token.v3","#))
        #expect(
            json
                == plain.replacingOccurrences(of: "invalid-token.v1", with: "invalid-token.v3").dropLast()
                + #","context":{"campaign":"spring","user":null}}"#)
    }

    @Test("a dead letter of a route with context carries it in pushbridge-context, after the other headers")
    func deadLetterContextHeader() {
        let letter = DeadLetter(
            error: "route promo: device_tokens: token is missing", route: "promo", source: self.source,
            value: Array("{}".utf8), sourceHeaders: [("traceparent", Array("00-1-2-01".utf8))], context: self.context)
        let record = letter.record(topic: "dead", maxBytes: 1_000_000)
        #expect(record.headers.first?.0 == "traceparent")
        #expect(record.headers.last?.0 == "pushbridge-context")
        #expect(record.headers.last?.1 == self.context)
        #expect(record.value == Array("{}".utf8))
    }

    @Test("a dead letter cut to fit Kafka keeps its forwarded headers and its context when it drops the others")
    func truncatedDeadLetterKeepsForwardedHeaders() throws {
        let traceparent = (
            "traceparent", Optional(Array("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".utf8))
        )
        let letter = DeadLetter(
            error: "not JSON", route: "promo", source: self.source, value: [UInt8](repeating: 0x41, count: 50_000),
            sourceHeaders: [("bulk", [UInt8](repeating: 0x42, count: 30_000)), traceparent], context: self.context,
            forwardedHeaders: [traceparent])
        let record = letter.record(topic: "dead", maxBytes: 40_000)
        let names = record.headers.map { $0.0 }
        #expect(!names.contains("bulk"))
        #expect(names.first == "traceparent")
        #expect(record.headers.first?.1 == traceparent.1)
        #expect(names.contains("pushbridge-context"))
        let truncated = try #require(record.headers.first { $0.0 == "pushbridge-truncated" }?.1)
        #expect(String(decoding: truncated, as: UTF8.self) == "value,headers")
        let size =
            (record.key?.count ?? 0) + (record.value?.count ?? 0)
            + record.headers.reduce(0) { $0 + $1.0.utf8.count + ($1.1?.count ?? 0) }
        #expect(size <= 40_000)
    }

    @Test("the zero-feature path: without context an outcome's bytes are those of before (v1, no context key)")
    func withoutContextNothingChanges() {
        let json = String(decoding: self.outcome(context: nil).encoded(), as: UTF8.self)
        #expect(json.hasPrefix(#"{"schema":"pushbridge.outcome.v1","#))
        #expect(!json.contains("context"))
        #expect(!json.contains("channel_id"))
    }
}
