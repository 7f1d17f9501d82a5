import Configuration
import Foundation
import Routing
import Testing

/// Loading valid configurations: defaults, types, `${VAR}` expansion, secrets from files, routes.
@Suite struct ConfigurationLoaderTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    @Test func minimalConfigurationGetsEveryDocumentedDefault() throws {
        let configuration = try self.files.load(minimalYAML).configuration

        #expect(configuration.kafka.bootstrapServers == "embedded")
        #expect(configuration.kafka.isEmbedded)
        #expect(configuration.kafka.groupID == "pushbridge")
        #expect(configuration.kafka.clientID == "pushbridge")
        #expect(configuration.kafka.commitInterval == .seconds(1))
        #expect(configuration.kafka.maxInFlightNotifications == 10_000)
        #expect(configuration.kafka.maxWaitingPerKey == 100)
        #expect(configuration.kafka.properties.isEmpty)
        #expect(configuration.kafka.consumerProperties.isEmpty)
        #expect(configuration.kafka.producerProperties.isEmpty)

        let apns = configuration.apns
        #expect(apns.environment == .production)
        #expect(apns.endpoint == nil)
        #expect(apns.effectiveEndpoint == APNSSettings.Endpoint(host: "api.push.apple.com", port: 443))
        #expect(apns.caFile == nil)
        #expect(apns.auth == self.files.tokenAuth)
        #expect(apns.connections == 2)
        #expect(apns.maxConcurrentStreams == 1000)
        #expect(apns.requestTimeout == .seconds(10))
        #expect(apns.retry == RetrySettings(maxAttempts: 5, initialBackoff: .seconds(1), maxBackoff: .seconds(300)))

        #expect(configuration.apps.isEmpty)
        #expect(configuration.outcomes.outcomes == "pushbridge.outcomes")
        #expect(configuration.outcomes.invalidTokens == "pushbridge.invalid-tokens")
        #expect(configuration.outcomes.deadLetters == "pushbridge.dead-letters")
        #expect(configuration.admin == AdminSettings(host: "0.0.0.0", port: 9464))
        #expect(configuration.logging == LoggingSettings(level: .info, format: .text))
        #expect(configuration.shutdown.drainTimeout == .seconds(30))
        #expect(configuration.shutdown.rebalanceDrainTimeout == .seconds(10))
    }

    @Test(arguments: [
        ("250ms", Duration.milliseconds(250)),
        ("10s", .seconds(10)),
        ("5m", .seconds(300)),
        ("1h", .seconds(3600)),
        ("1h30m", .seconds(5400)),
        ("0s", .zero),
        (" 2s ", .seconds(2)),
    ])
    func durationsParse(text: String, expected: Duration) {
        #expect(Duration(configuration: text) == expected)
    }

    @Test(arguments: ["10", "1.5s", "10 sec", "", "-1s", "s", "5d", "10S", "ms10", "99999999999999999h"])
    func malformedDurationsDoNotParse(text: String) {
        #expect(Duration(configuration: text) == nil)
    }

    @Test func everySectionIsReadWhenGiven() throws {
        let yaml = """
            kafka:
              bootstrap_servers: "broker-1:9092, broker-2:9092"
              group_id: bridge-a
              client_id: bridge-a-1
              commit_interval: 250ms
              max_in_flight: 500
              max_waiting_per_key: 20
              properties: { security.protocol: ssl, enable.idempotence: true, linger.ms: 5 }
              consumer_properties: { partition.assignment.strategy: cooperative-sticky }
              producer_properties: { compression.type: zstd }
            apns:
              environment: sandbox
              endpoint: https://127.0.0.1:2197
              ca_file: ${CA_FILE}
              auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
              connections: 4
              max_concurrent_streams: 50
              request_timeout: 3s
              retry: { max_attempts: 2, initial_backoff: 100ms, max_backoff: 2s }
            apps:
              other:
                auth: { type: certificate, p12_file: "\(self.files.path("push.p12"))" }
            routes:
              - { name: r, input_topic: t, app: other, device_tokens: "{{t}}", topic: com.x, payload: { a: 1 } }
            outcomes: { topic: o, invalid_tokens_topic: i, dead_letter_topic: d }
            admin: { listen: "[::1]:9000" }
            logging: { level: debug, format: json }
            shutdown: { drain_timeout: 5s, rebalance_drain_timeout: 2s }
            """
        let configuration = try self.files.load(yaml).configuration

        #expect(configuration.kafka.bootstrapServers == "broker-1:9092, broker-2:9092")
        #expect(configuration.kafka.groupID == "bridge-a")
        #expect(configuration.kafka.clientID == "bridge-a-1")
        #expect(configuration.kafka.commitInterval == .milliseconds(250))
        #expect(configuration.kafka.maxInFlightNotifications == 500)
        #expect(configuration.kafka.maxWaitingPerKey == 20)
        #expect(
            configuration.kafka.properties
                == ["security.protocol": "ssl", "enable.idempotence": "true", "linger.ms": "5"]
        )
        #expect(configuration.kafka.consumerProperties == ["partition.assignment.strategy": "cooperative-sticky"])
        #expect(configuration.kafka.producerProperties == ["compression.type": "zstd"])
        #expect(configuration.apns.environment == .sandbox)
        #expect(configuration.apns.effectiveEndpoint == APNSSettings.Endpoint(host: "127.0.0.1", port: 2197))
        #expect(configuration.apns.caFile == self.files.path("ca.pem"))
        #expect(configuration.apns.connections == 4)
        #expect(configuration.apns.maxConcurrentStreams == 50)
        #expect(configuration.apns.requestTimeout == .seconds(3))
        #expect(
            configuration.apns.retry
                == RetrySettings(maxAttempts: 2, initialBackoff: .milliseconds(100), maxBackoff: .seconds(2))
        )
        #expect(configuration.apps["other"]?.auth == .pkcs12(file: self.files.path("push.p12"), password: nil))
        #expect(configuration.apps["other"]?.connections == 2)
        #expect(configuration.apnsSettings(forApp: "other") == configuration.apps["other"])
        #expect(configuration.outcomes == OutcomeTopics(outcomes: "o", invalidTokens: "i", deadLetters: "d"))
        #expect(configuration.admin == AdminSettings(host: "::1", port: 9000))
        #expect(configuration.logging == LoggingSettings(level: .debug, format: .json))
        #expect(configuration.shutdown.drainTimeout == .seconds(5))
        #expect(configuration.shutdown.rebalanceDrainTimeout == .seconds(2))
    }

    @Test func variablesExpandInsideValues() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "bootstrap_servers: embedded", with: "bootstrap_servers: ${BROKER_HOST}:${BROKER_PORT}"
        )
        let configuration = try self.files.load(yaml, environment: ["BROKER_HOST": "kafka-1", "BROKER_PORT": "9093"])
            .configuration
        #expect(configuration.kafka.bootstrapServers == "kafka-1:9093")
    }

    @Test func defaultIsUsedWhenTheVariableIsUnset() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "bootstrap_servers: embedded", with: "bootstrap_servers: ${BROKERS:-localhost:9092}"
        )
        #expect(try self.files.load(yaml).configuration.kafka.bootstrapServers == "localhost:9092")
        #expect(
            try self.files.load(yaml, environment: ["BROKERS": "b:1"]).configuration.kafka.bootstrapServers == "b:1"
        )
    }

    @Test func expandedTextIsTypedByTheKeyItFills() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "apns:\n", with: "apns:\n  connections: ${CONNECTIONS:-3}\n  request_timeout: ${TIMEOUT:-2s}\n"
        )
        let configuration = try self.files.load(yaml, environment: ["TIMEOUT": "750ms"]).configuration
        #expect(configuration.apns.connections == 3)
        #expect(configuration.apns.requestTimeout == .milliseconds(750))
    }

    @Test func doubledDollarWritesALiteralReference() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "alert: \"{{text}}\"", with: "alert: \"costs $${PRICE}\"")
        let route = try self.files.load(yaml).configuration.routes[0]
        #expect(route.payload == ["aps": ["alert": "costs ${PRICE}"]])
    }

    @Test func secretIsReadFromItsFileWithoutTheTrailingNewline() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: """
                    type: token
                    key_file: ${KEY_FILE}
                    key_id: ABC123DEFG
                    team_id: DEF123GHIJ
                """,
            with: """
                    type: certificate
                    p12_file: \(self.files.path("push.p12"))
                    p12_password_file: \(self.files.path("p12-password"))
                """
        )
        let auth = try self.files.load(yaml).configuration.apns.auth
        #expect(auth == .pkcs12(file: self.files.path("push.p12"), password: Secret("s3cret-p12-password")))
    }

    @Test func secretsNeverPrint() {
        let secret = Secret("hunter2")
        #expect(String(describing: secret) == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        #expect(!String(describing: APNSAuth.pkcs12(file: "f", password: secret)).contains("hunter2"))
    }

    @Test func kafkaPropertyFromFileSetsThePropertyWithoutTheSuffix() throws {
        try self.files.write("kafka-password", "pa55word\n")
        let yaml = minimalYAML.replacingOccurrences(
            of: "  bootstrap_servers: embedded\n",
            with: """
                  bootstrap_servers: embedded
                  properties:
                    sasl.username: bridge
                    sasl.password_file: \(self.files.path("kafka-password"))

                """
        )
        let properties = try self.files.load(yaml).configuration.kafka.properties
        #expect(properties == ["sasl.username": "bridge", "sasl.password": "pa55word"])
    }

    @Test func certificateAuthTakesPEMCertificateAndKey() throws {
        try self.files.write("cert.pem", TestFiles.certificatePEM)
        try self.files.write("key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        let yaml = minimalYAML.replacingOccurrences(
            of: "type: token\n    key_file: ${KEY_FILE}\n    key_id: ABC123DEFG\n    team_id: DEF123GHIJ",
            with: """
                type: certificate
                    cert_file: \(self.files.path("cert.pem"))
                    key_file: \(self.files.path("key.pem"))
                """
        )
        let auth = try self.files.load(yaml).configuration.apns.auth
        #expect(auth == .pem(certificateFile: self.files.path("cert.pem"), keyFile: self.files.path("key.pem")))
    }

    @Test func authTypeIsInferredFromTokenKeys() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "    type: token\n", with: "")
        let auth = try self.files.load(yaml).configuration.apns.auth
        #expect(auth == self.files.tokenAuth)
    }

    @Test func routeBecomesARouteSpecWithTypedPayloadLeaves() throws {
        let yaml = """
            kafka: { bootstrap_servers: embedded }
            apns: { auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ } }
            routes:
              - name: order-shipped
                input_topic: orders.shipped
                match: { type: shipped, order.express: true, tier: 2 }
                device_tokens: "{{customer.apns_tokens}}"
                topic: com.example.shop
                push_type: background
                priority: 5
                ttl: 1h
                collapse_id: "order-{{order.id}}"
                payload:
                  aps: { content-available: 1 }
                  ratio: 0.5
                  flag: false
                  nothing: null
                  quoted: "10"
                  count: ${COUNT:-7}
                  list: [a, 2]
                  text: "{{order.id}}"
              - name: raw
                input_topic: raw
                device_tokens: "{{token}}"
                topic: com.example.shop
                expiration: "{{expires_at}}"
                payload_from: notification
            """
        let routes = try self.files.load(yaml).configuration.routes
        let route = try #require(routes.first)
        #expect(route.name == "order-shipped")
        #expect(route.inputTopic == "orders.shipped")
        #expect(route.match.map(\.path) == ["type", "order.express", "tier"])
        #expect(route.match.map(\.value) == ["shipped", true, 2])
        #expect(route.deviceTokens == "{{customer.apns_tokens}}")
        #expect(route.topic == "com.example.shop")
        #expect(route.pushType == "background")
        #expect(route.priority == 5)
        #expect(route.ttl == .seconds(3600))
        #expect(route.collapseID == "order-{{order.id}}")
        let payload: JSONValue = [
            "aps": ["content-available": 1], "ratio": 0.5, "flag": false, "nothing": nil, "quoted": "10",
            "count": 7, "list": ["a", 2], "text": "{{order.id}}",
        ]
        #expect(route.payload == payload)
        #expect(route.payload?.jsonText == payload.jsonText)
        #expect(routes[1].pushType == "alert")
        #expect(routes[1].priority == nil)
        #expect(routes[1].expiration == "{{expires_at}}")
        #expect(routes[1].payloadFrom == "notification")
        #expect(routes[1].payload == nil)
    }

    @Test func defaultPathIsTheEnvironmentVariableThenTheRepositoryExample() {
        #expect(ConfigurationLoader.defaultPath(environment: [:]) == "config/pushbridge.yaml")
        #expect(ConfigurationLoader.defaultPath(environment: ["PUSHBRIDGE_CONFIG": "/etc/pb.yaml"]) == "/etc/pb.yaml")
    }

    @Test func renderModeLoadsWithoutCredentialFiles() throws {
        let missing = "/nonexistent/AuthKey.p8"
        let loaded = try self.files.load(minimalYAML, environment: ["KEY_FILE": missing], checksFiles: false)
        #expect(loaded.configuration.apns.auth == .token(keyFile: missing, keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        #expect(loaded.router.inputTopics == ["greetings"])
    }
}
