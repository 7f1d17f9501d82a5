import Configuration
import Routing
import Testing

/// The configurations shipped in `config/` load cleanly.
@Suite struct ExampleConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    func load(_ name: String) throws -> LoadedConfiguration {
        try ConfigurationLoader(environment: self.files.environment).load(file: "\(repositoryRoot)/config/\(name)")
    }

    @Test func productionExampleValidates() throws {
        let loaded = try self.load("pushbridge.yaml")
        let configuration = loaded.configuration
        let names = configuration.routes.map(\.name)
        #expect(names == ["order-shipped", "inbox-sync", "delivery-activity", "raw-passthrough"])
        #expect(loaded.router.inputTopics == ["orders.shipped", "inbox.changed", "deliveries.progress", "push.raw"])
        #expect(configuration.kafka.bootstrapServers == "broker-1:9092,broker-2:9092")
        #expect(configuration.apps.keys.sorted() == ["shop-sandbox"])
        #expect(configuration.apps["shop-sandbox"]?.environment == .sandbox)
        #expect(configuration.logging.format == .json)
        #expect(configuration.routes.first?.context.map(\.name) == ["order_id", "campaign"])
        #expect(configuration.outcomes.forwardHeaders.names == ["traceparent", "tracestate"])
        #expect(configuration.outcomes.key == .deviceToken)
    }

    @Test func demoConfigurationValidates() throws {
        let configuration = try self.load("demo.yaml").configuration
        #expect(configuration.kafka.isEmbedded)
        #expect(configuration.apns.effectiveEndpoint == APNSSettings.Endpoint(host: "127.0.0.1", port: 2197))
        #expect(configuration.apns.caFile == self.files.path("simulator-ca.pem"))
        #expect(
            configuration.apns.auth
                == .token(keyFile: self.files.path("AuthKey_DEMO000001.p8"), keyID: "DEMO000001", teamID: "DEMOTEAM01")
        )
    }
}
