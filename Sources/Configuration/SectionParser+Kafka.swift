import BinaryProvider
import Foundation
import Routing
import Yams

// The `kafka` section.

extension SectionParser {
    func kafka(_ value: ConfigValue) -> KafkaSettings? {
        guard let mapping = value.mapping(known: Self.kafkaKeys) else {
            return nil
        }
        let servers = mapping.required(
            "bootstrap_servers", hint: "host:port[,host:port...], or \"embedded\" for the in-process mock cluster"
        )?.nonEmptyString()
        let groupID = mapping["group_id"].map { $0.nonEmptyString() } ?? "pushbridge"
        let clientID = mapping["client_id"].map { $0.nonEmptyString() } ?? "pushbridge"
        let commitInterval =
            mapping["commit_interval"].map {
                $0.duration(minimum: .milliseconds(1), maximum: Bounds.commitInterval)
            } ?? .seconds(1)
        let maxInFlight = mapping["max_in_flight"].map { $0.integer(in: 1...10_000_000) } ?? 10_000
        let maxInFlightBytes =
            mapping["max_in_flight_bytes"].map { $0.byteSize(in: KafkaSettings.maxInFlightBytesRange) }
            ?? KafkaSettings.defaultMaxInFlightBytes
        let maxWaitingPerKey =
            mapping["max_waiting_per_key"].map { $0.integer(in: 1...1_000_000) }
            ?? KafkaSettings.defaultMaxWaitingPerKey
        let properties = mapping["properties"].map(self.properties) ?? [:]
        let consumer = mapping["consumer_properties"].map(self.properties) ?? [:]
        let producer = mapping["producer_properties"].map(self.properties) ?? [:]
        guard let servers, let groupID, let clientID, let commitInterval, let maxInFlight, let maxInFlightBytes,
            let maxWaitingPerKey, let properties, let consumer, let producer
        else {
            return nil
        }
        return KafkaSettings(
            bootstrapServers: servers.trimmingWhitespace(), groupID: groupID, clientID: clientID,
            commitInterval: commitInterval, maxInFlightNotifications: maxInFlight, maxInFlightBytes: maxInFlightBytes,
            maxWaitingPerKey: maxWaitingPerKey, properties: properties, consumerProperties: consumer,
            producerProperties: producer
        )
    }

    /// librdkafka properties: any key, scalar values stringified. `NAME_file: PATH` sets `NAME` to the
    /// file's contents (a secret such as `sasl.password_file`).
    func properties(_ value: ConfigValue) -> [String: String]? {
        guard let mapping = value.mapping(known: nil) else {
            return nil
        }
        var properties: [String: String] = [:]
        var valid = true
        for entry in mapping.entries {
            guard !entry.value.isNull, let text = entry.value.text(expected: "a string, number or boolean") else {
                if entry.value.isNull {
                    entry.value.report(.wrongType, "expected a string, number or boolean, found null")
                }
                valid = false
                continue
            }
            if entry.key.hasSuffix("_file") {
                let name = String(entry.key.dropLast("_file".count))
                if mapping.contains(name) {
                    entry.value.report(.invalidValue, "give either \(name) or \(entry.key), not both")
                    valid = false
                } else if let secret = self.secret(fromFile: text, at: entry.value) {
                    properties[name] = secret
                } else {
                    valid = false
                }
                continue
            }
            properties[entry.key] = text
        }
        return valid ? properties : nil
    }
}
