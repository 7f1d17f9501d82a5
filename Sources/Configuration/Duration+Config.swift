extension Duration {
    /// The units a configuration duration may use, smallest first.
    static let configurationUnits: [(suffix: String, milliseconds: Int64)] = [
        ("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000),
    ]

    /// Parses a configuration duration: one or more `<integer><unit>` parts with unit `ms`, `s`, `m` or `h`,
    /// e.g. `250ms`, `10s`, `5m`, `1h`, `1h30m`. Returns `nil` for anything else (including a bare number,
    /// whose unit would be a guess).
    package init?(configuration text: String) {
        var rest = Substring(text.trimmingWhitespace())
        guard !rest.isEmpty else {
            return nil
        }
        var totalMilliseconds: Int64 = 0
        while !rest.isEmpty {
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, let value = Int64(digits) else {
                return nil
            }
            rest = rest.dropFirst(digits.count)
            let letters = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest.dropFirst(letters.count)
            guard let unit = Self.configurationUnits.first(where: { $0.suffix == letters }) else {
                return nil
            }
            let (product, overflow) = value.multipliedReportingOverflow(by: unit.milliseconds)
            guard !overflow else {
                return nil
            }
            let (sum, sumOverflow) = totalMilliseconds.addingReportingOverflow(product)
            guard !sumOverflow else {
                return nil
            }
            totalMilliseconds = sum
        }
        self = .milliseconds(totalMilliseconds)
    }
}

extension String {
    /// The string without leading and trailing spaces, tabs and newlines.
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = self.firstIndex(where: { !isSpace($0) }),
            let last = self.lastIndex(where: { !isSpace($0) })
        else {
            return ""
        }
        return String(self[first...last])
    }
}
