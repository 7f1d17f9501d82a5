import Configuration
import Testing

@testable import DoctorChecks

/// `pushbridge doctor` warns when the Kafka clients are told not to verify the brokers' TLS certificates or
/// host names, wherever the setting is given.
@Suite struct KafkaTLSCheckTests {
    /// A configuration whose `kafka` block carries `properties` (YAML lines, indented for the `kafka` block).
    func doctor(_ kafkaLines: String) throws -> Doctor {
        let yaml = """
            kafka:
              bootstrap_servers: broker-1:9093
            \(kafkaLines)
            apns:
              auth: { type: token, key_file: /nonexistent/AuthKey_ABC123DEFG.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ }
            routes:
              - name: greeting
                input_topic: greetings
                device_tokens: "{{token}}"
                topic: com.example.app
                payload: { aps: { alert: "{{text}}" } }
            """
        let loaded = try ConfigurationLoader(environment: [:], checksCredentialFiles: false)
            .load(yaml: yaml, file: "doctor.yaml")
        return Doctor(configuration: loaded.configuration)
    }

    @Test func certificateVerificationOffIsAWarningNamingTheSetting() throws {
        let checks = try self.doctor(
            """
              properties:
                security.protocol: SASL_SSL
                enable.ssl.certificate.verification: false
            """
        ).checkKafkaTLS()
        #expect(checks.count == 1)
        let check = try #require(checks.first)
        #expect(check.status == .warn)
        #expect(check.name == "kafka tls")
        #expect(check.found.contains("kafka.properties: enable.ssl.certificate.verification=false"))
        #expect(check.hint?.contains("ssl.ca.location") == true)
        #expect(check.description.hasPrefix("WARN kafka tls: TLS verification of the brokers is turned off"))
    }

    @Test(arguments: ["none", "\"\"", "NONE"])
    func hostNameVerificationOffInOneClientIsAWarning(_ value: String) throws {
        let checks = try self.doctor(
            """
              properties: { security.protocol: SSL }
              consumer_properties:
                ssl.endpoint.identification.algorithm: \(value)
            """
        ).checkKafkaTLS()
        let check = try #require(checks.first)
        #expect(check.status == .warn)
        #expect(check.found.contains("kafka.consumer_properties: ssl.endpoint.identification.algorithm="))
    }

    @Test func everyOffendingSettingIsListed() throws {
        let checks = try self.doctor(
            """
              producer_properties: { enable.ssl.certificate.verification: "0" }
              consumer_properties: { ssl.endpoint.identification.algorithm: none }
            """
        ).checkKafkaTLS()
        let found = try #require(checks.first?.found)
        #expect(found.contains("kafka.producer_properties: enable.ssl.certificate.verification=0"))
        #expect(found.contains("kafka.consumer_properties: ssl.endpoint.identification.algorithm=none"))
    }

    @Test func verifiedTLSIsOk() throws {
        let checks = try self.doctor(
            """
              properties:
                security.protocol: SASL_SSL
                enable.ssl.certificate.verification: true
                ssl.endpoint.identification.algorithm: https
            """
        ).checkKafkaTLS()
        #expect(checks.map(\.status) == [.ok])
    }

    @Test func plaintextKafkaHasNoTLSLine() throws {
        #expect(try self.doctor("  group_id: pushbridge").checkKafkaTLS().isEmpty)
    }
}
