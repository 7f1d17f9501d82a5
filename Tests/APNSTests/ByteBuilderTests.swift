import APNSCore
import Testing

/// The growing byte buffer the records' JSON is written into.
struct ByteBuilderTests {
    @Test("bytes appended one at a time and in runs of every length come out in order, across growth")
    func appendsSurviveGrowth() {
        var builder = ByteBuilder(capacity: 1)
        defer { builder.deallocate() }
        var expected: [UInt8] = []
        for length in 0..<40 {
            let run = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ length) }
            run.withUnsafeBufferPointer { builder.append(utf8: $0) }
            expected += run
            builder.append(UInt8(length))
            expected.append(UInt8(length))
        }
        builder.append(ascii: "end")
        expected += Array("end".utf8)
        #expect(builder.count == expected.count)
        #expect(builder.bytes == expected)
    }

    @Test(
        "runs of 1 to 24 bytes read from every offset of their buffer (short runs are copied as words) come out whole")
    func unalignedRuns() {
        let source = (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        var builder = ByteBuilder(capacity: 3)
        defer { builder.deallocate() }
        var expected: [UInt8] = []
        source.withUnsafeBufferPointer { all in
            for offset in 0..<8 {
                for length in 1...24 {
                    let run = UnsafeBufferPointer(rebasing: all[offset..<(offset + length)])
                    builder.append(utf8: run)
                    expected += run
                }
            }
        }
        #expect(builder.bytes == expected)
    }

    @Test("JSON text writes into it as into an array")
    func jsonText() {
        var builder = ByteBuilder(capacity: 8)
        defer { builder.deallocate() }
        JSONText.appendQuoted("a\"b\n", to: &builder)
        var array: [UInt8] = []
        JSONText.appendQuoted("a\"b\n", to: &array)
        #expect(builder.bytes == array)
        let mark = builder.count
        JSONText.appendTimestamp(epochMilliseconds: 1_764_000_000_123, to: &builder)
        #expect(String(decoding: builder.bytes[mark...], as: UTF8.self) == "2025-11-24T16:00:00.123Z")
    }
}
