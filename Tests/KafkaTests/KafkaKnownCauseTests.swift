import Testing

@testable import Kafka

/// librdkafka's words for the failures PushBridge names (KafkaKnownCause).
@Suite("Known causes of Kafka client failures")
struct KafkaKnownCauseTests {
    static let failLine =
        "127.0.0.1:19392/bootstrap: ApiVersionRequest failed: Local: Read underflow: probably due to broker version "
        + "< 0.10 (see api.version.request configuration) (after 11ms in state APIVERSION_QUERY)"
    static let debugLine =
        "127.0.0.1:19392/bootstrap: Protocol read buffer underflow for ApiVersion v3 at 274/279 "
        + "(rd_kafka_handle_ApiVersion:2216): expected 216172782113783806 bytes > 5 remaining bytes"

    @Test("librdkafka 2.0.2's ApiVersions read underflow is the tagged-fields bug, named with its fix")
    func apiVersionsUnderflowBefore22() throws {
        for line in [Self.failLine, Self.debugLine] {
            let cause = try #require(KafkaKnownCause.recognize(line, version: 0x0200_02ff))
            #expect(cause.kind == .apiVersionsTaggedFields)
            #expect(cause.cause.contains("PR #4278"))
            #expect(cause.fix.contains("librdkafka 2.2.0 or newer"))
        }
    }

    @Test("from librdkafka 2.2 on, the same words have another cause, so none is claimed")
    func notClaimedFrom22() {
        #expect(KafkaKnownCause.recognize(Self.failLine, version: 0x0202_00ff) == nil)
        #expect(KafkaKnownCause.recognize(Self.failLine, version: 0x020d_02ff) == nil)
    }

    @Test("other failures, underflows of other requests included, have no known cause")
    func otherFailures() {
        let others = [
            "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused",
            "Protocol read buffer underflow for Metadata v4 at 100/120: expected 40 bytes > 20 remaining bytes",
            "ApiVersionRequest failed: Local: Timed out",
        ]
        for line in others {
            #expect(KafkaKnownCause.recognize(line, version: 0x0200_02ff) == nil)
        }
    }
}
