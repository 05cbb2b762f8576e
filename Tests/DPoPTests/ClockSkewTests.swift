import DPoP
import Foundation
import Testing

@Suite("HTTP Date parsing and clock skew")
struct ClockSkewTests {
    @Test("the three HTTP date formats name the same instant (RFC 9110 §5.6.7's example)", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    ])
    func formats(text: String) {
        #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: 784_111_777))
    }

    @Test("dates around leap days and the year 2038 are exact")
    func calendar() {
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 12:00:00 GMT") == Date(timeIntervalSince1970: 1_709_208_000))
        #expect(HTTPDate.parse("Tue, 19 Jan 2038 03:14:08 GMT") == Date(timeIntervalSince1970: 2_147_483_648))
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
    }

    @Test("anything else is refused", arguments: [
        "", "yesterday", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
        "1994-11-06T08:49:37Z",
    ])
    func refuses(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("no sample means no correction; a server 30 s ahead gives about +30 s")
    func offset() {
        let estimator = ClockSkewEstimator()
        #expect(estimator.offset == 0)
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        estimator.record(serverDate: local.addingTimeInterval(30), receivedAt: local)
        #expect(estimator.offset == 30.5)
        estimator.record(dateHeader: "not a date", receivedAt: local)
        estimator.record(dateHeader: nil, receivedAt: local)
        #expect(estimator.offset == 30.5)
    }

    @Test("one slow response does not move the estimate (median of recent samples)")
    func median() {
        let estimator = ClockSkewEstimator()
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        for _ in 0..<4 { estimator.record(serverDate: local.addingTimeInterval(-20), receivedAt: local) }
        estimator.record(serverDate: local.addingTimeInterval(-300), receivedAt: local)
        #expect(estimator.offset == -19.5)
        // Recent samples win once the old ones are out of the window: the clock was fixed.
        for _ in 0..<ClockSkewEstimator.sampleLimit { estimator.record(serverDate: local, receivedAt: local) }
        #expect(estimator.offset == 0.5)
    }

    @Test("a header fed to the estimator moves the proof's iat")
    func proofUsesSkew() throws {
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        let estimator = ClockSkewEstimator()
        estimator.record(dateHeader: "Fri, 15 Jan 2027 08:00:20 GMT", receivedAt: local)
        let signer = DPoPSigner(key: .generate(), now: { local })
        let proof = try signer.proof(for: .authorizationServer(method: "POST", url: "https://a.example/t"),
                                     clockSkew: estimator.offset)
        // 2027-01-15T08:00:20Z is 1_800_000_020; the half second of truncation rounds down.
        #expect(try Independent.split(proof).claims["iat"] as? Int == 1_800_000_020)
    }
}

@Suite("Clock skew: resynchronizing after a refused proof")
struct ClockSkewResyncTests {
    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    @Test("a Date far from the estimate restarts it from that sample; a close one leaves it")
    func resynchronize() {
        let estimator = ClockSkewEstimator()
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        for _ in 0..<7 { estimator.record(serverDate: local.addingTimeInterval(2), receivedAt: local) }
        #expect(estimator.offset == 2.5)
        let near = ClockSkewResyncTests.httpDate(local.addingTimeInterval(5))
        #expect(!estimator.resynchronize(dateHeader: near, receivedAt: local, signedWith: 2.5), "3 seconds off: not a step")
        #expect(estimator.offset == 2.5)
        let stepped = ClockSkewResyncTests.httpDate(local.addingTimeInterval(63))
        #expect(estimator.resynchronize(dateHeader: stepped, receivedAt: local, signedWith: 2.5))
        #expect(estimator.offset == 63.5, "the step is followed at once")
        // A proof signed before other answers corrected the estimate: sign again, estimate kept.
        #expect(estimator.resynchronize(dateHeader: stepped, receivedAt: local, signedWith: 2.5))
        #expect(estimator.offset == 63.5)
        #expect(!estimator.resynchronize(dateHeader: "not a date", receivedAt: local, signedWith: 2.5))
    }
}
