import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The few fields of an outcome record the benchmarks need, found by scanning the bytes (a JSON parser would
/// cost the bridge CPU on this shared machine: `make bench` reads a million records). `make soak` reads more fields
/// with ``string(_:in:)``.
package struct OutcomeFields {
    /// `status`.
    package var status = ""
    /// `source.partition`; -1 when absent.
    package var partition: Int32 = -1
    /// `source.offset`; -1 when absent.
    package var offset: Int64 = -1
    /// `completed_at`, in milliseconds since the epoch.
    package var completedAtEpochMilliseconds: Int64?

    /// Scans one outcome record (its JSON value).
    package init(_ bytes: [UInt8]) {
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

    /// The first string value of `key` in the record (`"notification_id"`, `"sent_at"`), unescaped only as far as
    /// the bridge's own fields need (none of them holds a quote); `nil` when absent or not a string.
    package static func string(_ key: String, in bytes: [UInt8]) -> String? {
        guard let range = Self.value(after: "\"\(key)\":\"", in: bytes) else { return nil }
        let end = bytes[range].firstIndex(of: UInt8(ascii: "\"")) ?? range.upperBound
        return String(decoding: bytes[range.lowerBound..<end], as: UTF8.self)
    }

    /// The first integer value of `key` in the record (`"attempts"`); `nil` when absent.
    package static func integer(_ key: String, in bytes: [UInt8]) -> Int64? {
        guard let range = Self.value(after: "\"\(key)\":", in: bytes), range.lowerBound < range.upperBound,
            bytes[range.lowerBound] >= UInt8(ascii: "0"), bytes[range.lowerBound] <= UInt8(ascii: "9")
        else { return nil }
        return Self.integer(bytes[range])
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
    package static func epochMilliseconds(iso8601 bytes: ArraySlice<UInt8>) -> Int64? {
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
