import Foundation
import Synchronization

/// What the outcome topic held so far: counts by status, when the first and last outcome were read, and the
/// event-to-outcome latencies of the live phase's events.
final class OutcomeTally: Sendable {
    private struct State {
        var count = 0
        var deliveredCount = 0
        var otherStatusExamples: [String] = []
        var firstReadAt: ContinuousClock.Instant?
        var lastReadAt: ContinuousClock.Instant?
        var liveLatenciesMilliseconds: [Double] = []
        var liveCount = 0
    }

    private let state = Mutex(State())
    /// Produce time (epoch ms) of each live event, by "partition/offset".
    private let liveProducedAt = Mutex([Int64: Int64]())

    static func liveKey(partition: Int32, offset: Int64) -> Int64 {
        Int64(partition) << 40 | offset
    }

    func recordLiveEvent(partition: Int32, offset: Int64, producedAtEpochMilliseconds: Int64) {
        self.liveProducedAt.withLock {
            $0[Self.liveKey(partition: partition, offset: offset)] = producedAtEpochMilliseconds
        }
    }

    /// Counts one outcome record (its JSON value).
    func add(_ values: [[UInt8]]) {
        let now = ContinuousClock.now
        var live: [(key: Int64, completedAt: Int64)] = []
        var delivered = 0
        var others: [String] = []
        for value in values {
            let fields = OutcomeFields(value)
            if fields.status == "delivered" {
                delivered += 1
            } else if others.count < 5 {
                others.append(String(decoding: value, as: UTF8.self))
            }
            if fields.offset >= 0, let completedAt = fields.completedAtEpochMilliseconds {
                live.append((Self.liveKey(partition: fields.partition, offset: fields.offset), completedAt))
            }
        }
        let latencies: [Double] = self.liveProducedAt.withLock { producedAt in
            live.compactMap { entry in producedAt[entry.key].map { Double(entry.completedAt - $0) } }
        }
        self.state.withLock { state in
            state.count += values.count
            state.deliveredCount += delivered
            if state.otherStatusExamples.count < 5 { state.otherStatusExamples += others }
            if state.firstReadAt == nil { state.firstReadAt = now }
            state.lastReadAt = now
            state.liveLatenciesMilliseconds += latencies
            state.liveCount += latencies.count
        }
    }

    var count: Int { self.state.withLock { $0.count } }
    var deliveredCount: Int { self.state.withLock { $0.deliveredCount } }
    var otherStatusExamples: [String] { self.state.withLock { $0.otherStatusExamples } }
    var firstReadAt: ContinuousClock.Instant? { self.state.withLock { $0.firstReadAt } }
    var lastReadAt: ContinuousClock.Instant? { self.state.withLock { $0.lastReadAt } }
    var liveCount: Int { self.state.withLock { $0.liveCount } }
    var liveLatenciesMilliseconds: [Double] { self.state.withLock { $0.liveLatenciesMilliseconds } }
}

/// The few fields of an outcome record the benchmark needs, found by scanning the bytes (a JSON parser would
/// cost the bridge CPU on this shared machine: the benchmark reads a million records).
struct OutcomeFields {
    var status = ""
    var partition: Int32 = -1
    var offset: Int64 = -1
    var completedAtEpochMilliseconds: Int64?

    init(_ bytes: [UInt8]) {
        if let range = Self.value(after: #""status":""#, in: bytes) {
            self.status = String(
                decoding: bytes[
                    range.lowerBound..<(bytes[range].firstIndex(of: UInt8(ascii: "\"")) ?? range.upperBound)],
                as: UTF8.self)
        }
        // The source object comes first, so the first "partition" and "offset" are the event's.
        if let range = Self.value(after: #""partition":"#, in: bytes) {
            self.partition = Int32(Self.integer(bytes[range]))
        }
        if let range = Self.value(after: #""offset":"#, in: bytes) {
            self.offset = Self.integer(bytes[range])
        }
        if let range = Self.value(after: #""completed_at":""#, in: bytes) {
            self.completedAtEpochMilliseconds = Self.epochMilliseconds(iso8601: bytes[range])
        }
    }

    private static func value(after key: String, in bytes: [UInt8]) -> Range<Int>? {
        let needle = Array(key.utf8)
        guard bytes.count >= needle.count else { return nil }
        var index = 0
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0], bytes[index..<(index + needle.count)].elementsEqual(needle) {
                return (index + needle.count)..<bytes.count
            }
            index += 1
        }
        return nil
    }

    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int64 {
        var result: Int64 = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            result = result * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return result
    }

    /// `2026-11-22T10:00:00.135Z` as milliseconds since the epoch.
    static func epochMilliseconds(iso8601 bytes: ArraySlice<UInt8>) -> Int64? {
        let text = Array(bytes.prefix(24))
        guard text.count == 24, text[10] == UInt8(ascii: "T"), text[19] == UInt8(ascii: ".") else { return nil }
        func number(_ from: Int, _ length: Int) -> Int32 {
            Int32(Self.integer(text[from..<(from + length)][...]))
        }
        var parts = tm()
        parts.tm_year = number(0, 4) - 1900
        parts.tm_mon = number(5, 2) - 1
        parts.tm_mday = number(8, 2)
        parts.tm_hour = number(11, 2)
        parts.tm_min = number(14, 2)
        parts.tm_sec = number(17, 2)
        return Int64(timegm(&parts)) * 1000 + Int64(number(20, 3))
    }
}
