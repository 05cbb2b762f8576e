import Foundation

/// Parses the HTTP `Date` header (RFC 9110 §5.6.7, formerly RFC 7231 §7.1.1.1).
///
/// Senders must use IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`); recipients must also accept
/// the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`) forms. Written without `DateFormatter`, which depends on the
/// locale and is slow to create.
public enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The instant `text` names, or nil when it is none of the three formats.
    public static func parse(_ text: String) -> Date? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT" {
            // IMF-fixdate: day-name "," SP day SP month SP year SP time SP "GMT"
            return make(day: fields[1], month: fields[2], year: fields[3], time: fields[4], twoDigitYear: false)
        }
        if fields.count == 4, fields[0].hasSuffix(","), fields[3] == "GMT" {
            // RFC 850: day-name-l "," SP day "-" month "-" 2DIGIT-year SP time SP "GMT"
            let date = fields[1].split(separator: "-", omittingEmptySubsequences: false)
            guard date.count == 3 else { return nil }
            return make(day: date[0], month: date[1], year: date[2], time: fields[2], twoDigitYear: true)
        }
        if fields.count == 5, !fields[0].hasSuffix(",") {
            // asctime: day-name SP month SP ( 2DIGIT / ( SP 1DIGIT )) SP time SP year
            return make(day: fields[2], month: fields[1], year: fields[4], time: fields[3], twoDigitYear: false)
        }
        return nil
    }

    private static func make(day: Substring, month: Substring, year: Substring, time: Substring,
                             twoDigitYear: Bool) -> Date? {
        guard let monthIndex = months.firstIndex(where: { $0 == month }),
              day.count <= 2, let dayNumber = Int(day), (1...31).contains(dayNumber),
              year.count == (twoDigitYear ? 2 : 4), var yearNumber = Int(year) else { return nil }
        if twoDigitYear {
            // RFC 9110: a two-digit year more than 50 years in the future means the past century.
            yearNumber += yearNumber < 70 ? 2000 : 1900
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let days = daysSinceEpoch(year: yearNumber, month: monthIndex + 1, day: dayNumber)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date (H. Hinnant's days_from_civil).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
