/// A Kafka client failure whose cause is known from librdkafka's own words, with what fixes it: `doctor` prints
/// it instead of a bare "no metadata", and the clients of `pushbridge run` log it.
package struct KafkaKnownCause: Sendable, Hashable, CustomStringConvertible {
    /// The failures recognised.
    package enum Kind: String, Sendable, Hashable {
        /// librdkafka before 2.2 cannot read the broker's ApiVersions v3 answer: it skips each tagged field one
        /// byte short (librdkafka PR #4278, fixed in 2.2.0), and this broker's answer ends with tagged fields
        /// that make it read past the end ("Read underflow"). docs/kafka.md says which brokers do.
        case apiVersionsTaggedFields
    }

    /// Which failure.
    package var kind: Kind
    /// What goes wrong, and why.
    package var cause: String
    /// What fixes it.
    package var fix: String

    /// The cause, then the fix.
    package var description: String { "\(self.cause) (fix: \(self.fix))" }

    /// The version of the librdkafka this process runs with, e.g. `2.0.2`.
    package static var librdkafkaVersion: String { RDKafkaVersion.text }

    /// librdkafka 2.2.0 as `rd_kafka_version()` numbers it (0xMMmmrrpp): the first release with PR #4278.
    static let taggedFieldsFixVersion: Int32 = 0x0202_0000

    /// The known cause that `text` (an error or log line of librdkafka's) shows, if it shows one, for a
    /// librdkafka of `version` (`rd_kafka_version()`).
    static func recognize(_ text: String, version: Int32 = RDKafkaVersion.number) -> KafkaKnownCause? {
        // The FAIL line and the error callback say the first; with `debug=protocol` the PROTOUFLOW line says the
        // second. Both come only from parsing an ApiVersions answer that ended before librdkafka expected.
        let underflow =
            text.contains("ApiVersionRequest failed: Local: Read underflow")
            || text.contains("Protocol read buffer underflow for ApiVersion")
        guard underflow, version < Self.taggedFieldsFixVersion else { return nil }
        let running = RDKafkaVersion.text
        return KafkaKnownCause(
            kind: .apiVersionsTaggedFields,
            cause: "librdkafka \(running) cannot read the broker's ApiVersions answer (\"ApiVersionRequest failed: "
                + "Local: Read underflow\"): librdkafka before 2.2 skips tagged fields one byte short, and this "
                + "broker ends its ApiVersions v3 answer with tagged fields that make it read past the end "
                + "(librdkafka PR #4278, fixed in librdkafka 2.2.0)",
            fix: "run PushBridge linked against librdkafka 2.2.0 or newer (docs/deployment.md, \"librdkafka "
                + "version\"); Apache Kafka brokers are not affected, brokers such as Tansu 0.6.0 are (docs/kafka.md)"
        )
    }
}
