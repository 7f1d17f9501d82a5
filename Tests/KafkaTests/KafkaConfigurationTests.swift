import Kafka
import Testing

@Suite("Configuration")
struct KafkaConfigurationTests {
    @Test("an unknown property is rejected with its name and librdkafka's reason")
    func unknownPropertyIsNamedWithReason() throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: "127.0.0.1:9")
        configuration.properties = ["no.such.property": "1"]
        let error = #expect(throws: KafkaError.self) {
            try KafkaProducer(configuration: configuration, logger: testLogger("config"))
        }
        #expect(error?.property == "no.such.property")
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("'no.such.property'") == true)
        #expect(error?.message.contains("No such configuration property") == true)
    }

    @Test("an invalid value is rejected with the property's name and librdkafka's reason")
    func invalidValueIsNamedWithReason() throws {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:9", groupID: "g")
        configuration.properties = ["session.timeout.ms": "soon"]
        let error = #expect(throws: KafkaError.self) {
            try KafkaConsumer(configuration: configuration, topics: ["t"], logger: testLogger("config"))
        }
        #expect(error?.property == "session.timeout.ms")
        #expect(error?.message.contains("Invalid value") == true)
    }

    @Test("a rejected value is never repeated in the error: it may be a secret")
    func rejectedValueIsNotRepeated() throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: "127.0.0.1:9")
        configuration.properties = ["socket.timeout.ms": "Hunter2-secret"]
        let error = #expect(throws: KafkaError.self) {
            try KafkaProducer(configuration: configuration, logger: testLogger("config"))
        }
        #expect(error?.property == "socket.timeout.ms")
        #expect(error?.message.contains("Invalid value") == true)
        #expect(error?.message.contains("Hunter2") == false, "\(error?.message ?? "")")
    }

    @Test("a consumer without topics is rejected")
    func consumerWithoutTopicsIsRejected() throws {
        let configuration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:9", groupID: "g")
        let error = #expect(throws: KafkaError.self) {
            try KafkaConsumer(configuration: configuration, topics: [], logger: testLogger("config"))
        }
        #expect(error?.code == .invalidArgument)
    }
}
