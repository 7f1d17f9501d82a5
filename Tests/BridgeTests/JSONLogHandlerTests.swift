import Foundation
import Logging
import Testing

@testable import Bridge
@testable import BridgeCore

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    @Test("a line is one JSON object with timestamp, level, label, message, error and metadata")
    func lineIsJSON() throws {
        let line = JSONLogHandler.line(
            epochMilliseconds: 1_700_000_000_123, level: .warning, label: "pushbridge.kafka",
            message: "Publishing a record failed; retrying",
            metadata: ["kafka.topic": "out\"s", "pipeline.attempt": "2"], error: "boom\n"
        )
        #expect(!line.contains(UInt8(ascii: "\n")))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["ts"] == "2023-11-14T22:13:20.123Z")
        #expect(object["level"] == "warning")
        #expect(object["label"] == "pushbridge.kafka")
        #expect(object["message"] == "Publishing a record failed; retrying")
        #expect(object["error"] == "boom\n")
        #expect(object["kafka.topic"] == "out\"s")
        #expect(object["pipeline.attempt"] == "2")
    }
}

@Suite("Component loggers")
struct ComponentLoggerTests {
    @Test("with(label:) names another component and keeps the caller's level and metadata")
    func keepsLevelAndMetadata() {
        var logger = Logger(label: "pushbridge")
        logger.logLevel = .debug
        logger[metadataKey: "pod"] = "bridge-0"
        let component = logger.with(label: "pushbridge.kafka.consumer")
        #expect(component.label == "pushbridge.kafka.consumer")
        #expect(component.logLevel == .debug)
        #expect(component[metadataKey: "pod"] == "bridge-0")
    }
}
