import APNSCore
import Routing
import Testing

@testable import BridgeCore

// Values from events and servers that would crash the bridge or block a partition if used as they come:
// expirations past Int64 milliseconds, records larger than Kafka takes, unbounded texts and reasons.

@Suite("Hostile values in delivery and records")
struct HostileRecordTests {
    let source = SourceCoordinates(topic: "orders", partition: 1, offset: 7, key: Array("customer-42".utf8))

    @Test(
        "an expiration too far ahead to count in milliseconds never expires and never traps",
        arguments: [
            Int64(10_000_000_000_000_000), Int64.max, Int64.max / 1000 + 1,
        ])
    func hugeExpiration(expiration: Int64) {
        var machine = DeliveryStateMachine(
            expirationEpochSeconds: expiration, localFault: nil, maxAttempts: 3,
            backoff: Backoff(initial: .seconds(1), maximum: .seconds(Int64.max / 4))
        )
        #expect(machine.start(nowEpochMilliseconds: .max - 1) == .send)
        machine.sending(nowEpochMilliseconds: .max - 1)
        let answer = APNSResult.answered(
            APNSResponse(status: 503, reason: .serviceUnavailable, invalidSinceEpochMilliseconds: nil))
        guard case .wait = machine.received(answer, nowEpochMilliseconds: .max - 1) else {
            Issue.record("a retryable answer should wait for a retry")
            return
        }
    }

    @Test("durations too long to count in milliseconds or nanoseconds saturate instead of trapping")
    func saturatingDurations() {
        #expect(Duration.seconds(Int64.max).milliseconds == .max)
        #expect(Duration.seconds(Int64.min).milliseconds == .min)
        #expect(Duration.seconds(Int64.max).saturatedNanoseconds == .max)
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
        #expect(Duration.milliseconds(1500).saturatedNanoseconds == 1_500_000_000)
        let backoff = Backoff(initial: .seconds(Int64.max / 2), maximum: .seconds(Int64.max))
        #expect(backoff.delay(afterAttempt: 40) >= .zero)
    }

    @Test("a dead letter that fits is the event unchanged")
    func deadLetterThatFits() {
        let letter = DeadLetter(
            error: "not JSON", route: "", source: self.source, value: Array(repeating: 0x41, count: 10_000),
            sourceHeaders: [("trace", [1, 2])]
        )
        let record = letter.record(topic: "dead", maxBytes: 1_000_000)
        #expect(record.value == letter.value)
        #expect(record.key == letter.key)
        #expect(!record.headers.contains { $0.0 == DeadLetter.Header.truncated })
    }

    @Test("a dead letter larger than a Kafka message is cut to fit, with headers saying what and how large it was")
    func oversizedDeadLetter() throws {
        let value = [UInt8](repeating: 0x41, count: 990_000)
        let letter = DeadLetter(
            error: "the event is not JSON", route: "", source: self.source, value: value,
            sourceHeaders: [("trace", Array(repeating: 7, count: 20_000))]
        )
        let record = letter.record(topic: "dead", maxBytes: 1_000_000)
        #expect(size(of: record) <= 1_000_000 - DeadLetter.recordOverheadBytes)
        let headers = Dictionary(record.headers.map { ($0.0, String(decoding: $0.1 ?? [], as: UTF8.self)) }) { a, _ in a
        }
        #expect(headers[DeadLetter.Header.truncated] == "value")
        #expect(headers[DeadLetter.Header.originalSize] == "990000")
        #expect(headers["trace"] != nil, "the source headers stay when they leave room for the value")
        let kept = try #require(record.value)
        #expect(kept.count > 900_000)
        #expect(Array(value.prefix(kept.count)) == kept)
    }

    @Test("when key and headers alone would not leave room, headers are dropped and the key is cut")
    func hugeKeyAndHeaders() {
        let letter = DeadLetter(
            error: "x", route: "r",
            source: SourceCoordinates(topic: "t", partition: 0, offset: 1, key: Array(repeating: 0x4B, count: 600_000)),
            value: Array(repeating: 0x41, count: 600_000),
            sourceHeaders: (0..<100).map { ("h\($0)", Array(repeating: 1, count: 5_000)) }
        )
        let record = letter.record(topic: "dead", maxBytes: 1_000_000)
        #expect(size(of: record) <= 1_000_000)
        #expect(record.key?.count == DeadLetter.truncatedKeyBytes)
        let truncated = record.headers.first { $0.0 == DeadLetter.Header.truncated }.map {
            String(decoding: $0.1 ?? [], as: UTF8.self)
        }
        #expect(truncated == "headers,key")
        #expect(!record.headers.contains { $0.0.hasPrefix("h") })
        #expect(record.value?.count == 600_000, "the value is kept whole once key and headers are cut")
    }

    @Test("the error header is bounded and shows control characters escaped")
    func boundedErrorHeader() throws {
        let letter = DeadLetter(
            error: "route r: value \"\r\napns-priority: 5\u{0}\" " + String(repeating: "é", count: 5_000),
            route: "r", source: self.source, value: nil, sourceHeaders: []
        )
        let header = try #require(letter.headers.first { $0.0 == DeadLetter.Header.error })
        let value = try #require(header.1)
        #expect(value.count <= DeadLetter.maximumErrorBytes)
        let text = String(decoding: value, as: UTF8.self)
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 })
        #expect(text.contains("\\u{d}\\u{a}apns-priority: 5\\u{0}"))
        #expect(text.hasSuffix("…"))
    }

    @Test("texts copied from events into outcomes are bounded, so an outcome always fits a Kafka message")
    func boundedOutcomeFields() throws {
        let huge = String(repeating: "ab", count: 500_000)
        let record = OutcomeRecord(
            notificationID: "8b4c2a1e-0000-4000-8000-000000000001", route: "r",
            source: SourceCoordinates(topic: "t", partition: 0, offset: 1, key: Array(huge.utf8)),
            deviceToken: huge, apnsTopic: huge, pushType: "alert", priority: 10, status: .rejected, httpStatus: nil,
            reason: huge, apnsUniqueID: huge, attempts: 0, latencyMilliseconds: nil, sentAtEpochMilliseconds: nil,
            completedAtEpochMilliseconds: 0
        )
        #expect(record.encoded().count < 8 * RecordText.maximumFieldBytes)
        #expect(record.key.count <= RecordText.maximumFieldBytes)
    }

    @Test("bounded text cuts at a character boundary and marks the cut")
    func boundedText() {
        #expect(RecordText.bounded("short") == "short")
        let cut = RecordText.bounded(String(repeating: "é", count: 100), maxBytes: 10)
        #expect(cut.utf8.count <= 10)
        #expect(cut == "ééé…")
    }

    @Test("a reason the server made up is counted under one label; Apple's and the bridge's keep theirs")
    func reasonLabels() {
        #expect(BridgeMetrics.reasonLabel("Unregistered") == "Unregistered")
        #expect(BridgeMetrics.reasonLabel("RequestTimeout") == "RequestTimeout")
        #expect(BridgeMetrics.reasonLabel(nil) == "")
        #expect(BridgeMetrics.reasonLabel("x\(UInt64.random(in: 0...UInt64.max))") == "Unknown")
        #expect(BridgeMetrics.reasonLabel(String(repeating: "A", count: 10_000)) == "Unknown")
    }
}

private func size(of record: OutgoingRecord) -> Int {
    (record.key?.count ?? 0) + (record.value?.count ?? 0)
        + record.headers.reduce(0) { total, header in total + header.0.utf8.count + (header.1?.count ?? 0) + 8 }
}
