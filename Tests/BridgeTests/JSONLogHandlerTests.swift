@testable import Bridge
import Foundation
import Logging
import Testing

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
