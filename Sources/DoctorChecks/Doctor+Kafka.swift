import Configuration
import Foundation
import Kafka

// Kafka: reachable, every topic present, and TLS verification left on.
extension Doctor {
    /// The librdkafka settings that turn off TLS server verification, and the values that do so.
    static let verificationSettings: [(key: String, isOff: @Sendable (String) -> Bool)] = [
        ("enable.ssl.certificate.verification", { ["false", "0", "no", "off", "f", "n"].contains($0) }),
        ("ssl.endpoint.identification.algorithm", { $0.isEmpty || $0 == "none" }),
    ]

    /// A warning when Kafka's TLS verification is turned off in `kafka.properties`, `consumer_properties` or
    /// `producer_properties`: the bridge would then talk to any broker presenting any certificate (or any
    /// certificate for another host), and send it its credentials. An ok line when TLS is configured and
    /// nothing turns verification off; nothing when Kafka is not spoken over TLS at all.
    package func checkKafkaTLS() -> [DoctorCheck] {
        let kafka = self.configuration.kafka
        let sections = [
            ("kafka.properties", kafka.properties), ("kafka.consumer_properties", kafka.consumerProperties),
            ("kafka.producer_properties", kafka.producerProperties),
        ]
        var findings: [String] = []
        var usesTLS = false
        for (section, properties) in sections {
            let normalized = Dictionary(
                properties.map { ($0.key.lowercased(), $0.value.trimmingCharacters(in: .whitespaces).lowercased()) },
                uniquingKeysWith: { first, _ in first }
            )
            if let protocolName = normalized["security.protocol"], protocolName.hasSuffix("ssl") {
                usesTLS = true
            }
            for setting in Self.verificationSettings {
                if let value = normalized[setting.key], setting.isOff(value) {
                    findings.append("\(section): \(setting.key)=\(value.isEmpty ? "\"\"" : value)")
                }
            }
        }
        guard findings.isEmpty else {
            return [
                DoctorCheck(
                    .warn, "kafka tls",
                    "TLS verification of the brokers is turned off (\(findings.joined(separator: ", ")))",
                    hint: "remove these settings so that librdkafka verifies the broker certificate and host name "
                        + "(enable.ssl.certificate.verification=true, ssl.endpoint.identification.algorithm=https, "
                        + "its defaults); for a private CA set ssl.ca.location instead"
                )
            ]
        }
        if usesTLS {
            return [DoctorCheck(.ok, "kafka tls", "broker certificates and host names are verified")]
        }
        return []
    }

    /// Kafka reachable (one metadata request) and every input and result topic present.
    package func checkKafka() async -> [DoctorCheck] {
        let kafka = self.configuration.kafka
        if kafka.isEmbedded {
            return [
                DoctorCheck(
                    .ok, "kafka", "bootstrap_servers is 'embedded': the in-process mock cluster, nothing to reach")
            ]
        }
        let metadata: KafkaMetadata
        do {
            metadata = try await KafkaMetadata.fetch(
                bootstrapServers: kafka.bootstrapServers,
                properties: kafka.properties,
                timeout: self.options.kafkaTimeout
            )
        } catch {
            if let cause = (error as? KafkaError)?.knownCause {
                return [
                    DoctorCheck(
                        .fail, "kafka reachable", "\(kafka.bootstrapServers) answers, but \(cause.cause)",
                        hint: cause.fix),
                    DoctorCheck(
                        .warn, "kafka topics", "not checked: Kafka is unusable", hint: "fix the cause above first"),
                ]
            }
            return [
                DoctorCheck(
                    .fail, "kafka reachable",
                    "no metadata from \(kafka.bootstrapServers) within "
                        + "\(Self.text(self.options.kafkaTimeout)): \(error)",
                    hint: "check kafka.bootstrap_servers, that the brokers run and this host can reach their ports, "
                        + "and the security settings under kafka.properties"
                ),
                DoctorCheck(
                    .warn, "kafka topics", "not checked: Kafka is unreachable", hint: "fix the reachability first"),
            ]
        }
        var checks = [
            DoctorCheck(
                .ok, "kafka reachable",
                "\(kafka.bootstrapServers): \(metadata.brokerCount) broker\(metadata.brokerCount == 1 ? "" : "s"), "
                    + "\(metadata.partitionCountsByTopic.count) topics "
                    + "(librdkafka \(KafkaKnownCause.librdkafkaVersion))"
            )
        ]
        let outcomes = self.configuration.outcomes
        let needed = self.configuration.inputTopics + [outcomes.outcomes, outcomes.invalidTokens, outcomes.deadLetters]
        let missing = needed.filter { metadata.partitionCountsByTopic[$0] == nil }
        if missing.isEmpty {
            let inputs = self.configuration.inputTopics.map { "\($0) (\(metadata.partitionCountsByTopic[$0]!)p)" }
            checks.append(
                DoctorCheck(
                    .ok, "kafka topics", "all present: \(inputs.joined(separator: ", ")) and the 3 result topics")
            )
        } else {
            checks.append(
                DoctorCheck(
                    .fail, "kafka topics", "missing on the cluster: \(missing.joined(separator: ", "))",
                    hint: "create them, e.g. kafka-topics.sh --create --topic NAME --partitions N "
                        + "(input topics: as many partitions as bridge instances you want), "
                        + "or fix the names in routes/outcomes"
                )
            )
        }
        return checks
    }
}
