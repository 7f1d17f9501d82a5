import Configuration
import Foundation
import Testing

/// The keys that bound memory and stalls: `kafka.max_in_flight_bytes` and `outcomes.publish_stall_timeout`.
@Suite struct ConfigurationMemoryBoundsTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    private func kafka(_ line: String) -> String {
        minimalYAML.replacingOccurrences(
            of: "  bootstrap_servers: embedded\n", with: "  bootstrap_servers: embedded\n  \(line)\n")
    }

    @Test func defaultsAreDocumented() throws {
        let configuration = try self.files.load(minimalYAML).configuration
        #expect(configuration.kafka.maxInFlightBytes == 64 << 20)
        #expect(configuration.outcomes.publishStallTimeout == .seconds(60))
        #expect(configuration.kafka.producerMessageMaxBytes == 1_000_000)
    }

    @Test(arguments: [
        ("max_in_flight_bytes: 1048576", 1 << 20),
        ("max_in_flight_bytes: 64MiB", 64 << 20),
        ("max_in_flight_bytes: \"512 KiB\"", -1),
        ("max_in_flight_bytes: 2GB", 2 << 30),
        ("max_in_flight_bytes: 1gib", 1 << 30),
    ])
    func sizesParse(line: String, expected: Int) throws {
        if expected < 0 {
            #expect(!self.files.problems(self.kafka(line)).isEmpty, "below 1 MiB")
        } else {
            #expect(try self.files.load(self.kafka(line)).configuration.kafka.maxInFlightBytes == expected)
        }
    }

    @Test(arguments: [
        "max_in_flight_bytes: 10 apples", "max_in_flight_bytes: -5MiB", "max_in_flight_bytes: 99999999999999999999GiB",
        "max_in_flight_bytes: 9223372036854775807GiB", "max_in_flight_bytes: 65GiB", "max_in_flight_bytes: MiB",
        "max_in_flight_bytes: 1.5MiB", "max_in_flight_bytes: true",
    ])
    func badSizesNameTheKey(line: String) throws {
        let problems = self.files.problems(self.kafka(line))
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.path == "kafka.max_in_flight_bytes")
    }

    @Test func publishStallTimeoutIsADurationOfAtLeastASecond() throws {
        let yaml = minimalYAML + "outcomes:\n  publish_stall_timeout: 5m\n"
        #expect(try self.files.load(yaml).configuration.outcomes.publishStallTimeout == .seconds(300))
        let tooShort = self.files.problems(minimalYAML + "outcomes:\n  publish_stall_timeout: 10ms\n")
        #expect(tooShort.first?.path == "outcomes.publish_stall_timeout")
    }

    @Test func producerMessageSizeFollowsTheProducerProperties() throws {
        let yaml = self.kafka("producer_properties: { message.max.bytes: 2000000 }")
        #expect(try self.files.load(yaml).configuration.kafka.producerMessageMaxBytes == 2_000_000)
    }
}
