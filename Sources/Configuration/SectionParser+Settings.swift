import BinaryProvider
import Foundation
import Routing
import Yams

// `outcomes`, `admin`, `logging` and `shutdown`.

extension SectionParser {
    func outcomes(_ value: ConfigValue?) -> OutcomeTopics? {
        let mapping = value?.mapping(known: Self.outcomeKeys)
        if value != nil && mapping == nil {
            return nil
        }
        let topic = mapping?["topic"].map { self.topicName($0) } ?? "pushbridge.outcomes"
        let invalid = mapping?["invalid_tokens_topic"].map { self.topicName($0) } ?? "pushbridge.invalid-tokens"
        let dead = mapping?["dead_letter_topic"].map { self.topicName($0) } ?? "pushbridge.dead-letters"
        let stall =
            mapping?["publish_stall_timeout"].map { $0.duration(minimum: .seconds(1), maximum: .seconds(3600)) }
            ?? OutcomeTopics.defaultPublishStallTimeout
        let key = mapping?["key"].map { self.outcomeKey($0) } ?? .deviceToken
        let forward = mapping?["forward_headers"].map { self.forwardHeaders($0) } ?? HeaderForwarding()
        guard let topic, let invalid, let dead, let stall, let key, let forward else {
            return nil
        }
        return OutcomeTopics(
            outcomes: topic, invalidTokens: invalid, deadLetters: dead, publishStallTimeout: stall, key: key,
            forwardHeaders: forward)
    }

    /// A Kafka topic name: 1 to 249 of `[A-Za-z0-9._-]`.
    func topicName(_ value: ConfigValue) -> String? {
        guard let text = value.nonEmptyString()?.trimmingWhitespace() else {
            return nil
        }
        guard text.utf8.allSatisfy(Self.isNameByte), text.utf8.count <= 249, text != ".", text != ".." else {
            value.report(
                .invalidValue, "\(value.describe(text)) is not a valid Kafka topic name",
                hint: "use up to 249 letters, digits, '.', '_' and '-'"
            )
            return nil
        }
        return text
    }

    /// A letter, digit, `.`, `_` or `-`: what Kafka topic names and lane names are made of.
    static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    func admin(_ value: ConfigValue?) -> AdminSettings? {
        let mapping = value?.mapping(known: ["listen"])
        if value != nil && mapping == nil {
            return nil
        }
        guard let listen = mapping?["listen"] else {
            return AdminSettings(host: "0.0.0.0", port: 9464)
        }
        guard let text = listen.nonEmptyString()?.trimmingWhitespace() else {
            return nil
        }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            portText = rest.hasPrefix(":") ? rest.dropFirst() : ""
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = ""
            portText = ""
        }
        guard !host.isEmpty, let port = Int(portText), (0...65_535).contains(port) else {
            listen.report(
                .invalidValue, "\(listen.describe(text)) is not host:port",
                hint: "e.g. 0.0.0.0:9464, 127.0.0.1:9464 or [::]:9464"
            )
            return nil
        }
        return AdminSettings(host: String(host), port: port)
    }

    func logging(_ value: ConfigValue?) -> LoggingSettings? {
        let mapping = value?.mapping(known: ["level", "format"])
        if value != nil && mapping == nil {
            return nil
        }
        let level = mapping?["level"].map { $0.oneOf(LoggingSettings.Level.self) } ?? .info
        let format = mapping?["format"].map { $0.oneOf(LoggingSettings.Format.self) } ?? .text
        guard let level, let format else {
            return nil
        }
        return LoggingSettings(level: level, format: format)
    }

    func shutdown(_ value: ConfigValue?) -> ShutdownSettings? {
        let mapping = value?.mapping(known: ["drain_timeout", "rebalance_drain_timeout"])
        if value != nil && mapping == nil {
            return nil
        }
        let timeout = mapping?["drain_timeout"].map { $0.duration(maximum: Bounds.drainTimeout) } ?? .seconds(30)
        let rebalance =
            mapping?["rebalance_drain_timeout"].map { $0.duration(maximum: Bounds.drainTimeout) } ?? .seconds(10)
        guard let timeout, let rebalance else {
            return nil
        }
        return ShutdownSettings(drainTimeout: timeout, rebalanceDrainTimeout: rebalance)
    }
}
