import Bridge
import BridgeCore
import Foundation
import Routing
import TestSupport
import Testing

@Suite("Record schemas")
struct RecordSchemaTests {
    let source = SourceCoordinates(topic: "orders", partition: 0, offset: 7, key: nil)
    let id = "0b4c2a1e-1111-8222-9333-444455556666"
    let token = String(repeating: "ab", count: 32)

    func outcome(_ status: OutcomeStatus, http: Int?, reason: String?, attempts: Int) -> [UInt8] {
        OutcomeRecord(
            notificationID: self.id, route: "r", source: self.source, deviceToken: self.token,
            apnsTopic: "com.example", pushType: "alert", priority: 10, status: status, httpStatus: http,
            reason: reason, apnsUniqueID: nil, attempts: attempts, latencyMilliseconds: attempts > 0 ? 3.25 : nil,
            sentAtEpochMilliseconds: attempts > 0 ? 1_000 : nil, completedAtEpochMilliseconds: 2_000
        ).encoded()
    }

    @Test("every kind of record the bridge writes satisfies its schema")
    func recordsMatchSchemas() async throws {
        let letter = DeadLetter(error: "not JSON", route: "", source: self.source, value: [0xFF], sourceHeaders: [])
        var headerObject = "{"
        headerObject += letter.headers.map { "\"\($0.0)\":\"\(String(decoding: $0.1 ?? [], as: UTF8.self))\"" }
            .joined(separator: ",")
        headerObject += "}"
        let report = try await RecordSchemas.validate([
            (.outcome, self.outcome(.delivered, http: 200, reason: nil, attempts: 1)),
            (.outcome, self.outcome(.rejected, http: 410, reason: "Unregistered", attempts: 1)),
            (.outcome, self.outcome(.rejected, http: nil, reason: "BadDeviceToken", attempts: 0)),
            (.outcome, self.outcome(.failed, http: 503, reason: "ServiceUnavailable", attempts: 5)),
            (.outcome, self.outcome(.expired, http: nil, reason: nil, attempts: 0)),
            (
                .invalidToken,
                InvalidTokenRecord(
                    deviceToken: self.token, apnsTopic: "com.example", reason: "Unregistered",
                    invalidSinceEpochMilliseconds: 1_700_000_000_000, notificationID: self.id, route: "r",
                    source: self.source
                ).encoded()
            ),
            (.deadLetterHeaders, Array(headerObject.utf8)),
            (
                .invalidTokenV2,
                InvalidTokenRecordV2(
                    deviceToken: self.token, apnsTopic: "com.example", reason: "Unregistered",
                    invalidSinceEpochMilliseconds: 1_700_000_000_000
                ).encoded()
            ),
            (
                .invalidTokenV2,
                InvalidTokenRecordV2(
                    deviceToken: self.token, apnsTopic: "com.example", reason: "BadDeviceToken",
                    invalidSinceEpochMilliseconds: nil, notificationID: self.id, route: "r", source: self.source
                ).encoded()
            ),
        ])
        #expect(report.problems == [])
        #expect(report.exitStatus == 0)
    }

    func superseded() -> OutcomeRecord {
        OutcomeRecord(
            notificationID: self.id, route: "r", source: self.source, deviceToken: self.token,
            apnsTopic: "com.example.push-type.liveactivity", pushType: "liveactivity", priority: 10,
            status: .superseded, httpStatus: nil, reason: nil, apnsUniqueID: nil, attempts: 0,
            latencyMilliseconds: nil, sentAtEpochMilliseconds: nil, completedAtEpochMilliseconds: 2_000,
            supersededBy: "7d0f5a3c-2222-5333-8444-555566667777")
    }

    @Test("a superseded outcome is v2 with superseded_by; v1 refuses it; other outcomes stay v1 unchanged")
    func supersededOutcomeIsV2() async throws {
        let json = String(decoding: self.superseded().encoded(), as: UTF8.self)
        #expect(json.contains(#""schema":"pushbridge.outcome.v2""#))
        #expect(json.contains(#""status":"superseded""#))
        #expect(json.hasSuffix(#""channel_id":null,"superseded_by":"7d0f5a3c-2222-5333-8444-555566667777"}"#))
        let delivered = String(decoding: self.outcome(.delivered, http: 200, reason: nil, attempts: 1), as: UTF8.self)
        #expect(delivered.contains(#""schema":"pushbridge.outcome.v1""#))
        #expect(!delivered.contains("superseded_by"))
        let report = try await RecordSchemas.validate([(.outcomeV2, self.superseded().encoded())])
        #expect(report.problems == [])
        #expect(try await RecordSchemas.validate([(.outcome, self.superseded().encoded())]).exitStatus == 1)
    }

    @Test("the v2 schema refuses a superseded outcome without its replacement, or one that was sent")
    func brokenSupersededIsCaught() async throws {
        var missing = self.superseded()
        missing.supersededBy = nil
        var sent = self.superseded()
        sent.attempts = 1
        sent.sentAtEpochMilliseconds = 1_000
        for record in [missing.encoded(), sent.encoded()] {
            let report = try await RecordSchemas.validate([(.outcomeV2, record)])
            #expect(report.exitStatus == 1)
        }
    }

    @Test("a feedback record is v2 with notification_id, route and source null; v1 keeps requiring them")
    func feedbackRecordIsV2() async throws {
        let record = InvalidTokenRecordV2(
            deviceToken: self.token, apnsTopic: "com.example", reason: "Unregistered",
            invalidSinceEpochMilliseconds: 1_700_000_000_000)
        let json = String(decoding: record.encoded(), as: UTF8.self)
        #expect(json.contains(#""schema":"pushbridge.invalid-token.v2""#))
        #expect(json.contains(#""invalid_since":"2023-11-14T22:13:20.000Z""#))
        #expect(json.contains(#""notification_id":null,"route":null,"source":null"#))
        let asV1 = try await RecordSchemas.validate([(.invalidToken, record.encoded())])
        #expect(asV1.exitStatus == 1, "v1 requires the source event")
        // Half a source is neither a feedback record nor a notification's.
        let half = InvalidTokenRecordV2(
            deviceToken: self.token, apnsTopic: "com.example", reason: "Unregistered",
            invalidSinceEpochMilliseconds: nil, route: "r")
        let report = try await RecordSchemas.validate([(.invalidTokenV2, half.encoded())])
        #expect(report.exitStatus == 1)
    }

    func broadcastOutcome(
        _ status: OutcomeStatus, http: Int?, reason: String?, channel: String = "dHN0LXNyY2gtY2hubA=="
    )
        -> OutcomeRecord
    {
        OutcomeRecord(
            notificationID: self.id, route: "scores", source: self.source, deviceToken: "",
            apnsTopic: "com.example.push-type.liveactivity", pushType: "liveactivity", priority: 10, status: status,
            httpStatus: http, reason: reason, apnsUniqueID: nil, attempts: 1, latencyMilliseconds: 2.5,
            sentAtEpochMilliseconds: 1_000, completedAtEpochMilliseconds: 2_000, channelID: channel)
    }

    @Test("a broadcast's outcome is v2: device_token null, channel_id set, keyed by the channel; v1 refuses it")
    func broadcastOutcomeIsV2() async throws {
        let delivered = self.broadcastOutcome(.delivered, http: 200, reason: nil)
        let json = String(decoding: delivered.encoded(), as: UTF8.self)
        #expect(json.hasPrefix(#"{"schema":"pushbridge.outcome.v2","#))
        #expect(json.contains(#""device_token":null,"#))
        #expect(json.hasSuffix(#","channel_id":"dHN0LXNyY2gtY2hubA==","superseded_by":null}"#))
        #expect(delivered.key == Array("dHN0LXNyY2gtY2hubA==".utf8))
        let report = try await RecordSchemas.validate([
            (.outcomeV2, delivered.encoded()),
            (.outcomeV2, self.broadcastOutcome(.rejected, http: 400, reason: "ChannelNotRegistered").encoded()),
            (.outcomeV2, self.broadcastOutcome(.failed, http: 503, reason: "ServiceUnavailable").encoded()),
        ])
        #expect(report.problems == [])
        #expect(try await RecordSchemas.validate([(.outcome, delivered.encoded())]).exitStatus == 1, "v1 needs a token")
        // A device outcome stays v1, byte for byte as before: no channel_id.
        let device = String(decoding: self.outcome(.delivered, http: 200, reason: nil, attempts: 1), as: UTF8.self)
        #expect(device.hasPrefix(#"{"schema":"pushbridge.outcome.v1","#))
        #expect(!device.contains("channel_id"))
    }

    @Test("the v2 schema wants exactly one of device_token and channel_id")
    func v2WantsOneDestination() async throws {
        let delivered = String(
            decoding: self.broadcastOutcome(.delivered, http: 200, reason: nil).encoded(), as: UTF8.self)
        let both = delivered.replacingOccurrences(of: #""device_token":null"#, with: #""device_token":"abcd""#)
        let neither = delivered.replacingOccurrences(
            of: #""channel_id":"dHN0LXNyY2gtY2hubA==""#, with: #""channel_id":null"#)
        let deviceAsV2 = delivered.replacingOccurrences(of: #""device_token":null"#, with: #""device_token":"abcd""#)
            .replacingOccurrences(of: #""channel_id":"dHN0LXNyY2gtY2hubA==""#, with: #""channel_id":null"#)
        let report = try await RecordSchemas.validate([
            (.outcomeV2, Array(both.utf8)), (.outcomeV2, Array(neither.utf8)),
        ])
        #expect(report.problems.count == 2, "\(report.problems)")
        #expect(try await RecordSchemas.validate([(.outcomeV2, Array(deviceAsV2.utf8))]).problems == [])
    }

    @Test(
        "records with context validate against the v3 schemas; v1 and v2 refuse them; a dead letter's pushbridge-context satisfies v2's and v1's headers"
    )
    func contextRecordsAreV3() async throws {
        let context = Array(#"{"campaign":"spring-sale","user":null,"cart":{"items":2}}"#.utf8)
        var delivered = OutcomeRecord(
            notificationID: self.id, route: "r", source: self.source, deviceToken: self.token, apnsTopic: "com.example",
            pushType: "alert", priority: 10, status: .delivered, httpStatus: 200, reason: nil, apnsUniqueID: nil,
            attempts: 1, latencyMilliseconds: 1.5, sentAtEpochMilliseconds: 1_000, completedAtEpochMilliseconds: 2_000,
            context: context)
        var superseded = self.superseded()
        superseded.context = context
        var broadcast = self.broadcastOutcome(.delivered, http: 200, reason: nil)
        broadcast.context = context
        let invalid = InvalidTokenRecord(
            deviceToken: self.token, apnsTopic: "com.example", reason: "Unregistered",
            invalidSinceEpochMilliseconds: 1_700_000_000_000, notificationID: self.id, route: "r", source: self.source,
            context: context)
        let letter = DeadLetter(
            error: "route r: device_tokens: token is missing", route: "r", source: self.source, value: [0x7B, 0x7D],
            sourceHeaders: [], context: context)
        var headerObject: [String: String] = [:]
        for (name, value) in letter.headers { headerObject[name] = String(decoding: value ?? [], as: UTF8.self) }
        let headers = Array(try JSONSerialization.data(withJSONObject: headerObject))
        let report = try await RecordSchemas.validate([
            (.outcomeV3, delivered.encoded()), (.outcomeV3, superseded.encoded()), (.outcomeV3, broadcast.encoded()),
            (.invalidTokenV3, invalid.encoded()), (.deadLetterHeadersV2, headers), (.deadLetterHeaders, headers),
        ])
        #expect(report.problems == [])
        // An old reader dispatching on `schema` skips them; its schema refuses them.
        for schema in [RecordSchemas.Schema.outcome, .outcomeV2] {
            #expect(try await RecordSchemas.validate([(schema, delivered.encoded())]).exitStatus == 1)
        }
        #expect(try await RecordSchemas.validate([(.invalidTokenV2, invalid.encoded())]).exitStatus == 1)
        // The v3 schema holds the context to its bounds.
        delivered.context = Array(
            ("{" + (0...16).map { "\"k\($0)\":1" }.joined(separator: ",") + "}").utf8)
        #expect(try await RecordSchemas.validate([(.outcomeV3, delivered.encoded())]).exitStatus == 1)
    }

    @Test("the schema check catches a record that breaks the contract")
    func brokenRecordIsCaught() async throws {
        let delivered = self.outcome(.delivered, http: 500, reason: nil, attempts: 1)
        let report = try await RecordSchemas.validate([(.outcome, delivered)])
        #expect(report.exitStatus == 1)
        #expect(report.problems.count == 1)
    }
}
