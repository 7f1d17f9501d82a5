extension ConfigValue {
    /// A size in bytes: a whole number, optionally with a unit (`B`, `KiB`, `MiB`, `GiB`; `KB`, `MB`, `GB` mean
    /// the same powers of 1024), within `range`.
    func byteSize(in range: ClosedRange<Int>) -> Int? {
        guard let text = self.text(expected: "a size") else {
            return nil
        }
        let trimmed = text.trimmingWhitespace()
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        let unit = String(trimmed.dropFirst(digits.count)).trimmingWhitespace().lowercased()
        let multipliers: [String: Int] = [
            "": 1, "b": 1, "kib": 1 << 10, "kb": 1 << 10, "mib": 1 << 20, "mb": 1 << 20, "gib": 1 << 30, "gb": 1 << 30,
        ]
        guard !digits.isEmpty, let number = Int(digits), let multiplier = multipliers[unit] else {
            self.report(
                .invalidValue, "\(self.describe(text)) is not a size",
                hint: "a whole number of bytes, or with a unit: 512KiB, 64MiB, 1GiB"
            )
            return nil
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow, range.contains(bytes) else {
            self.report(
                .invalidValue,
                "\(self.describe(text)) is out of range: must be at least \(range.lowerBound) bytes and at most "
                    + "\(range.upperBound >> 30) GiB"
            )
            return nil
        }
        return bytes
    }
}
