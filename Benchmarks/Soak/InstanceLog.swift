import BenchSupport
import Foundation

/// One line of a bridge instance's JSON log (`logging.format: json`).
struct LogLine: Sendable {
    /// Seconds since the epoch (`ts`).
    var time: Double
    var level: String
    var label: String
    var message: String
    /// The line's other fields (metadata, `error.type`, `error.message`), as text.
    var fields: [String: String]

    /// The partitions a `kafka.partitions` field names: `soak.events[0],soak.events[3]` (the Kafka layer) or
    /// `[soak.events[0], soak.events[3]]` (the pipeline).
    var partitions: [Int32] {
        guard let text = self.fields["kafka.partitions"] else { return [] }
        var result: [Int32] = []
        var digits = ""
        var inBrackets = false
        for character in text {
            if character == "[" {
                inBrackets = true
                digits = ""
            } else if character == "]" {
                if inBrackets, !digits.isEmpty, let partition = Int32(digits) { result.append(partition) }
                inBrackets = false
                digits = ""
            } else if inBrackets, character.isNumber {
                digits.append(character)
            } else {
                inBrackets = false
            }
        }
        return result
    }

    /// The error code of `error.message` (`REBALANCE_IN_PROGRESS: …` → `REBALANCE_IN_PROGRESS`), if any.
    var errorCode: String? {
        self.fields["error.message"].map { String($0.prefix { $0 != ":" }) }
    }

    /// Every JSON line of the log file at `path`, in order; lines that are not JSON objects with a `ts` are skipped.
    static func read(path: String) -> [LogLine] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var lines: [LogLine] = []
        for raw in data.split(separator: UInt8(ascii: "\n")) where raw.first == UInt8(ascii: "{") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any],
                let ts = object["ts"] as? String,
                let milliseconds = OutcomeFields.epochMilliseconds(iso8601: Array(ts.utf8)[...])
            else { continue }
            var fields: [String: String] = [:]
            for (key, value) in object where !["ts", "level", "label", "message"].contains(key) {
                fields[key] = (value as? String) ?? "\(value)"
            }
            lines.append(
                LogLine(
                    time: Double(milliseconds) / 1000, level: object["level"] as? String ?? "",
                    label: object["label"] as? String ?? "", message: object["message"] as? String ?? "",
                    fields: fields))
        }
        return lines
    }
}

/// One instance's hold on one partition, from its own log lines: assigned, then revoked (or the process ended).
struct Ownership: Sendable {
    var instance: Int
    var partition: Int32
    /// The Kafka layer's `Partitions assigned`.
    var start: Double
    /// The Kafka layer's `Partitions revoked` (fetching stopped; the drain follows), or the SIGKILL, or the process's
    /// end when it ended without one.
    var end: Double?
    /// The pipeline's line after the drain (`Partitions revoked` or `Revoked partitions still had unfinished…`).
    var releasedAt: Double?
    /// librdkafka said the assignment was lost (`kafka.lost=true`): nothing was committed.
    var lost = false
    /// The drain ran out (the pipeline's warning, or the shutdown's `Drain timeout…`).
    var drainTimedOut = false
    /// A commit that failed after this revocation and before the instance's next assignment (`Committing offsets
    /// failed`: the revocation's synchronous commit; periodic ones are not sent while the group rebalances): its
    /// error.
    var commitFailure: String?
    /// The process was killed (SIGKILL) while it held the partition.
    var killed = false
    /// The process ended without logging a revocation (e.g. its close ran out of time).
    var endedWithProcess = false
    /// The shutdown's consumer close ran out of time after this revocation (`Consumer close did not finish in
    /// time`), so its commit was not answered in time, if it was made at all.
    var closeTimedOut = false

    /// Until when the instance may still have finished work of the partition.
    var workEnd: Double? { self.releasedAt.map { max($0, self.end ?? $0) } ?? self.end }

    /// Every hold of every partition in `lines` (one instance's log, in order). `killedAt`: when the soak sent
    /// SIGKILL; `exitedAt`: when the process was seen gone.
    static func holds(instance: Int, lines: [LogLine], killedAt: Double?, exitedAt: Double?) -> [Ownership] {
        var holds: [Ownership] = []
        var open: [Int32: Int] = [:]
        var draining: [Int32: Int] = [:]
        var lastRevocation: [Int] = []
        var shutdownDrainTimedOut = false
        for line in lines {
            switch (line.label, line.message) {
            case ("pushbridge.kafka.consumer", "Partitions assigned"):
                lastRevocation = []
                for partition in line.partitions {
                    if let index = open[partition] { holds[index].end = line.time }
                    open[partition] = holds.count
                    holds.append(Ownership(instance: instance, partition: partition, start: line.time))
                }
            case ("pushbridge.kafka.consumer", "Partitions revoked"):
                lastRevocation = []
                for partition in line.partitions {
                    guard let index = open.removeValue(forKey: partition) else { continue }
                    holds[index].end = line.time
                    holds[index].lost = line.fields["kafka.lost"] == "true"
                    holds[index].drainTimedOut = shutdownDrainTimedOut
                    draining[partition] = index
                    lastRevocation.append(index)
                }
            case ("pushbridge.pipeline", let message)
            where message == "Partitions revoked" || message.hasPrefix("Revoked partitions still had unfinished"):
                for partition in line.partitions {
                    guard let index = draining.removeValue(forKey: partition) ?? open[partition] else { continue }
                    holds[index].releasedAt = line.time
                    if message.hasPrefix("Revoked partitions still") { holds[index].drainTimedOut = true }
                }
            case (_, "Committing offsets failed"):
                for index in lastRevocation {
                    holds[index].commitFailure = line.errorCode ?? line.fields["error.message"] ?? "failed"
                }
            case (_, let message) where message.hasPrefix("Drain timeout"):
                shutdownDrainTimedOut = true
            case (_, let message) where message.hasPrefix("Consumer close did not finish in time"):
                for index in lastRevocation { holds[index].closeTimedOut = true }
            default:
                break
            }
        }
        for index in open.values {
            if let killedAt {
                holds[index].end = killedAt
                holds[index].killed = true
            } else {
                holds[index].end = exitedAt
                holds[index].endedWithProcess = true
            }
        }
        return holds.sorted { ($0.partition, $0.start) < ($1.partition, $1.start) }
    }
}
