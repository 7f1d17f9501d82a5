/// A small, seedable generator (SplitMix64): the same seed and request order give the same faults. Visible to
/// the package's other modules so that sample data (the demo's events, tests' random orders) is reproducible the
/// same way.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    package init(seed: UInt64) { self.state = seed }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in 0..<1.
    package mutating func nextUnitInterval() -> Double {
        Double(self.next() >> 11) / Double(UInt64(1) << 53)
    }
}
