import Foundation
import Logging
import Synchronization
import Testing

@testable import Bridge
@testable import BridgeCore

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    @Test("a line is one JSON object with timestamp, level, label, message and metadata")
    func lineIsJSON() throws {
        let line = JSONLogHandler.line(
            epochMilliseconds: 1_700_000_000_123, level: .warning, label: "pushbridge.kafka",
            message: "Publishing a record failed; retrying",
            metadata: ["kafka.topic": "out\"s", "pipeline.attempt": "2"]
        )
        #expect(!line.contains(UInt8(ascii: "\n")))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["ts"] == "2023-11-14T22:13:20.123Z")
        #expect(object["level"] == "warning")
        #expect(object["label"] == "pushbridge.kafka")
        #expect(object["message"] == "Publishing a record failed; retrying")
        #expect(object["kafka.topic"] == "out\"s")
        #expect(object["pipeline.attempt"] == "2")
    }

    @Test("an error passed to the log call is two fields, error.type and error.message, and no error field")
    func errorIsTypeAndMessage() throws {
        let line = JSONLogHandler.line(
            epochMilliseconds: 0, level: .warning, label: "pushbridge", message: "Publishing a record failed",
            metadata: ["kafka.topic": "out"], error: LogTestError(detail: "boom\n")
        )
        #expect(!line.contains(UInt8(ascii: "\n")))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["error.type"] == "LogTestError")
        #expect(object["error.message"] == "broken: boom\n")
        #expect(object["error"] == nil)
        #expect(object["kafka.topic"] == "out")
    }

    @Test("a line without an error has neither error field")
    func noErrorNoFields() throws {
        let line = JSONLogHandler.line(
            epochMilliseconds: 0, level: .info, label: "pushbridge", message: "Partitions assigned",
            metadata: ["kafka.partitions": "events/0"]
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(Set(object.keys) == ["ts", "level", "label", "message", "kafka.partitions"])
    }

    @Test("the error's fields replace metadata of the same names, so each key appears once")
    func errorFieldsWinOverMetadata() throws {
        let line = JSONLogHandler.line(
            epochMilliseconds: 0, level: .error, label: "pushbridge", message: "failed",
            metadata: ["error.type": "mine", "error.message": "mine"], error: LogTestError(detail: "real")
        )
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.components(separatedBy: "\"error.type\"").count == 2)
        #expect(text.components(separatedBy: "\"error.message\"").count == 2)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["error.type"] == "LogTestError")
        #expect(object["error.message"] == "broken: real")
    }
}

@Suite("Errors in log lines")
struct LoggedErrorTests {
    @Test("the type is named without its module, with its enclosing types")
    func typeNameDropsTheModule() {
        #expect(LoggedError.typeName(of: LogTestError(detail: "")) == "LogTestError")
        #expect(LoggedError.typeName(of: BridgeRuntime.Failure(reason: "")) == "BridgeRuntime.Failure")
        #expect(LoggedError.typeName(of: CancellationError()) == "CancellationError")
        #expect(String(reflecting: BridgeRuntime.Failure.self) == "Bridge.BridgeRuntime.Failure")
    }

    @Test("a private type's name carries no build-specific context")
    func privateTypeName() {
        #expect(String(reflecting: Hidden.self).contains("unknown context"))
        #expect(LoggedError.typeName(of: Hidden()) == "Hidden")
        #expect(String(reflecting: NestedHidden.self).contains("unknown context"))
        #expect(LoggedError.typeName(of: NestedHidden()) == "LoggedErrorTests.NestedHidden")
    }

    private struct NestedHidden: Error {}

    @Test("the text format shows the same two fields for an error, and neither without one")
    func textFormat() {
        let output = CapturedOutput()
        var logger = Logger(label: "pushbridge.kafka") { label in
            TextLogHandler(StreamLogHandler(label: label, stream: output, metadataProvider: nil))
        }
        logger.logLevel = .debug
        logger.warning(
            "Committing offsets failed", error: LogTestError(detail: "no broker"), metadata: ["kafka.topic": "t"])
        logger.info("Partitions assigned", metadata: ["kafka.partitions": "t/0"])
        let lines = output.text.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines.first?.contains("error.message=broken: no broker error.type=LogTestError kafka.topic=t") == true)
        #expect(lines.first?.hasSuffix("Committing offsets failed") == true)
        #expect(lines.last?.contains("error") == false)
        #expect(lines.last?.contains("kafka.partitions=t/0") == true)
    }
}

struct LogTestError: Error, CustomStringConvertible {
    var detail: String
    var description: String { "broken: \(self.detail)" }
}

private struct Hidden: Error {}

private final class CapturedOutput: TextOutputStream, Sendable {
    private let buffer = Mutex("")

    var text: String { self.buffer.withLock { $0 } }

    func write(_ string: String) {
        self.buffer.withLock { $0 += string }
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
