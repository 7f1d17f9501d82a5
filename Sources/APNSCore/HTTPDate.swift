import Foundation

/// The HTTP `date` header's format (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`), written and
/// read without a `DateFormatter` (not thread-safe to share, slow to create per response).
package enum HTTPDate {
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The range of dates ``format(_:)`` writes as they are: years 1 to 9999, IMF-fixdate's four digits.
    static let formattableSeconds: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// `date` as IMF-fixdate, whole seconds (rounded down). A date outside years 1-9999 (or not finite) is
    /// written as the nearest end of that range instead of trapping on the conversion to whole seconds.
    package static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        let range = Self.formattableSeconds
        let clamped = interval.isNaN ? 0 : min(max(interval, range.lowerBound), range.upperBound)
        let seconds = Int64(clamped.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = self.civil(fromDays: days)
        let weekday = self.weekdays[Int(((days % 7) + 7) % 7)]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fourDigitYear = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(weekday), \(two(day)) \(self.months[Int(month) - 1]) \(fourDigitYear) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    /// Parses an IMF-fixdate; `nil` for anything else (the obsolete RFC 850 and asctime forms are not accepted).
    package static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
            let day = Int64(parts[1]), (1...31).contains(day),
            let monthIndex = self.months.firstIndex(where: { $0 == parts[2] }),
            let year = Int64(parts[3]), parts[3].count == 4
        else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let hour = Int64(clock[0]), let minute = Int64(clock[1]),
            let second = Int64(clock[2]), hour < 24, minute < 60, second < 61
        else { return nil }
        let days = self.days(fromCivil: year, Int64(monthIndex + 1), day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    // Howard Hinnant's days-from-civil and civil-from-days (proleptic Gregorian calendar).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
