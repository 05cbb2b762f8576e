import AccountStoreCore
import Foundation
import PropertyBased
import Testing
@testable import BlueskyDaemon

/// The census's sorted OAuth session ends, added in bulk at start and changed one at a time
/// later: however adds, moves and removals interleave, it counts what a plain list would.
@Suite("The census's session ends: bulk adds, then changes, counted as a plain list would")
struct AccountCensusEndsTests {
    static let now = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// An OAuth account whose public session (two weeks) started `daysAgo` days ago.
    static func record(_ number: Int, daysAgo: Int) -> AccountRecord {
        AccountRecord(id: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", number))!,
                      did: "did:plc:census\(number)", pds: "https://pds.example", authKind: .oauth,
                      oauth: OAuthSessionInfo(issuer: "https://auth.example", tokenEndpoint: "https://auth.example/token",
                                              revocationEndpoint: nil, scope: "atproto",
                                              sessionStartedAt: now.addingTimeInterval(Double(-daysAgo) * 86_400),
                                              clientKind: .loopback, clientID: "http://localhost"))
    }

    /// How many of `records` end within the warning time, counted one by one.
    static func endingSoon(_ records: [Int: AccountRecord]) -> Int {
        let horizon = now.addingTimeInterval(AccountRecord.sessionEndWarning)
        return records.values.count { record in record.sessionEndsAt.map { $0 <= horizon } ?? false }
    }

    @Test("random adds (many between reads), moves and removals: the count matches a plain list after every read")
    func matchesPlainList() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...(4 * 40 * 15 - 1)).array(of: 0...200)) { operations in
            let census = AccountCensus()
            var registered: [Int: AccountRecord] = [:]
            for packed in operations {
                let (action, number, days) = (packed % 4, packed / 4 % 40, packed / 160)
                switch action {
                case 0, 1:  // add (or move an account already there)
                    let new = Self.record(number, daysAgo: days)
                    census.change(from: registered[number], to: new)
                    registered[number] = new
                case 2:  // remove
                    if let old = registered.removeValue(forKey: number) { census.remove(old) }
                default:  // read
                    #expect(census.sessionsEndingSoon(now: Self.now) == Self.endingSoon(registered))
                }
            }
            #expect(census.sessionsEndingSoon(now: Self.now) == Self.endingSoon(registered))
        }
    }

    @Test("100,000 accounts added as a start adds them, newest session first, then one in a hundred removed: counted right")
    func bulkStart() {
        let census = AccountCensus()
        var registered: [Int: AccountRecord] = [:]
        for number in 0..<100_000 {
            let record = Self.record(number, daysAgo: number % 15)
            census.add(record)
            registered[number] = record
        }
        #expect(census.sessionsEndingSoon(now: Self.now) == Self.endingSoon(registered))
        for number in stride(from: 0, to: 100_000, by: 100) { census.remove(registered.removeValue(forKey: number)!) }
        #expect(census.sessionsEndingSoon(now: Self.now) == Self.endingSoon(registered))
        #expect(census.count(.active) == registered.count)
    }
}
