import CSHA1

/// SHA-1 (FIPS 180-4) of a short message, for name-based UUIDs only (``NotificationID``), never for security.
///
/// swift-crypto's `Insecure.SHA1` gives the same digest (a test checks this), but it allocates a context per
/// call and costs over a microsecond per notification; this runs on the stack in a fraction of that, and on a
/// CPU with the SHA extensions its compression runs in `CSHA1` (a test checks both paths give the same words).
enum SHA1 {
    /// The 20-byte digest of `message`.
    static func digest(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        let words = Self.digestWords(message)
        var digest: [UInt8] = []
        digest.reserveCapacity(20)
        for word in [words.0, words.1, words.2, words.3, words.4] {
            withUnsafeBytes(of: word.bigEndian) { digest.append(contentsOf: $0) }
        }
        return digest
    }

    /// The digest of `message` as five big-endian words, without allocating; with the CPU's SHA extensions when
    /// it has them and `hardware` allows (`false`: the portable compression, the reference tests compare with).
    static func digestWords(
        _ message: UnsafeRawBufferPointer, hardware: Bool = true
    ) -> (UInt32, UInt32, UInt32, UInt32, UInt32) {
        let blockCount = (message.count + 8) / 64 + 1
        var state: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
        )
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: blockCount * 64) { padded in
            // The message, 0x80, zeros, then its length in bits as a 64-bit big-endian number.
            _ = padded.initialize(fromContentsOf: message)
            padded[message.count] = 0x80
            for index in (message.count + 1)..<(padded.count - 8) { padded[index] = 0 }
            let bitCount = UInt64(message.count) * 8
            for offset in 0..<8 {
                padded[padded.count - 1 - offset] = UInt8(truncatingIfNeeded: bitCount >> (8 * UInt64(offset)))
            }
            if hardware, Self.hardwareAvailable {
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 5) { words in
                    (words[0], words[1], words[2], words[3], words[4]) = state
                    pb_sha1_compress_blocks(words.baseAddress, padded.baseAddress, blockCount)
                    state = (words[0], words[1], words[2], words[3], words[4])
                }
                return
            }
            Self.compressPortably(UnsafeBufferPointer(padded), blockCount: blockCount, &state)
        }
        return state
    }

    /// Whether the CPU has the SHA extensions: then the compression runs in `CSHA1` (~6× fewer instructions).
    static let hardwareAvailable = pb_sha1_hardware_available() == 1

    private static func compressPortably(
        _ padded: UnsafeBufferPointer<UInt8>, blockCount: Int, _ state: inout (UInt32, UInt32, UInt32, UInt32, UInt32)
    ) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 80) { words in
            for block in 0..<blockCount {
                Self.compress(UnsafeBufferPointer(rebasing: padded[(block * 64)..<(block * 64 + 64)]), words, &state)
            }
        }
    }

    private static func compress(
        _ block: UnsafeBufferPointer<UInt8>,
        _ words: UnsafeMutableBufferPointer<UInt32>,
        _ state: inout (UInt32, UInt32, UInt32, UInt32, UInt32)
    ) {
        for index in 0..<16 {
            words[index] =
                UInt32(block[4 * index]) << 24 | UInt32(block[4 * index + 1]) << 16
                | UInt32(block[4 * index + 2]) << 8 | UInt32(block[4 * index + 3])
        }
        for index in 16..<80 {
            words[index] = Self.rotate(words[index - 3] ^ words[index - 8] ^ words[index - 14] ^ words[index - 16], 1)
        }
        var (a, b, c, d, e) = state
        // Four loops of 20 rounds rather than one with a switch: the round function is fixed per loop.
        func round(_ f: UInt32, _ k: UInt32, _ word: UInt32) {
            let temp = Self.rotate(a, 5) &+ f &+ e &+ k &+ word
            e = d
            d = c
            c = Self.rotate(b, 30)
            b = a
            a = temp
        }
        for index in 0..<20 { round((b & c) | (~b & d), 0x5A82_7999, words[index]) }
        for index in 20..<40 { round(b ^ c ^ d, 0x6ED9_EBA1, words[index]) }
        for index in 40..<60 { round((b & c) | (b & d) | (c & d), 0x8F1B_BCDC, words[index]) }
        for index in 60..<80 { round(b ^ c ^ d, 0xCA62_C1D6, words[index]) }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e)
    }

    private static func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 {
        value << count | value >> (32 - count)
    }
}
