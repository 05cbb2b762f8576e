@testable import ATIdentity
import BlueskyTesting
import Foundation
import Testing

/// The hand-written DNS client against a real dnsmasq on a free loopback port.
@Suite("DNS TXT lookups against dnsmasq")
struct DNSTXTResolverTests {
    private func resolver(for dnsmasq: Dnsmasq) throws -> DNSTXTResolver {
        try DNSTXTResolver(nameservers: [dnsmasq.nameserver], timeout: .seconds(2))
    }

    @Test func singleStringRecord() async throws {
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.alice.test", value: "did=did:plc:alice")])
        defer { dnsmasq.stop() }
        let values = try await resolver(for: dnsmasq).lookupTXT("_atproto.alice.test")
        #expect(values == ["did=did:plc:alice"])
    }

    @Test func multiStringRecordIsConcatenated() async throws {
        let dnsmasq = try await Dnsmasq.start(txtRecordStrings: [
            (name: "_atproto.multi.test", strings: ["did=did:plc:", "abc", "def"]),
            (name: "_atproto.multi.test", strings: ["other, with a comma and \"quotes\""]),
        ])
        defer { dnsmasq.stop() }
        let values = try await resolver(for: dnsmasq).lookupTXT("_atproto.MULTI.test.")
        #expect(Set(values) == ["did=did:plc:abcdef", "other, with a comma and \"quotes\""])
    }

    @Test func missingNameIsAnEmptyAnswerNotAnError() async throws {
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.alice.test", value: "did=did:plc:alice")],
                                              addresses: [(domain: "bob.test", ip: "127.0.0.1")])
        defer { dnsmasq.stop() }
        let resolver = try resolver(for: dnsmasq)
        #expect(try await resolver.lookupTXT("_atproto.nobody.test").isEmpty)  // NXDOMAIN
        #expect(try await resolver.lookupTXT("bob.test").isEmpty)  // the name exists, no TXT
    }

    @Test func truncatedAnswerFallsBackToTCP() async throws {
        // Six ~215-byte records cannot fit in a 512-byte UDP answer: dnsmasq sets the TC bit.
        let records = (1...6).map { index in
            (name: "_atproto.big.test", value: "did=did:plc:\(index)" + String(repeating: "x", count: 200))
        }
        let dnsmasq = try await Dnsmasq.start(txtRecords: records)
        defer { dnsmasq.stop() }
        let values = try await resolver(for: dnsmasq).lookupTXT("_atproto.big.test")
        // All six only fit in a TCP answer: the truncated UDP one holds two at most.
        #expect(values.count == 6)
        #expect(Set(values) == Set(records.map(\.value)))
    }

    @Test func unreachableServerIsATransientError() async throws {
        // Nothing listens on this port of the loopback: a refusal or a timeout, never "no record".
        let resolver = try DNSTXTResolver(nameservers: ["127.0.0.1:9"], timeout: .milliseconds(300))
        await #expect {
            _ = try await resolver.lookupTXT("_atproto.alice.test")
        } throws: { error in
            guard let error = error as? DNSError, case .lookupFailed = error else { return false }
            return error.isTransient && error.description.contains("127.0.0.1:9")
        }
    }

    @Test func secondServerIsAskedWhenTheFirstFails() async throws {
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.alice.test", value: "did=did:plc:alice")])
        defer { dnsmasq.stop() }
        // 2 s, not 0.3: dnsmasq on two cores busy with the other suites' start once took longer.
        let resolver = try DNSTXTResolver(nameservers: ["127.0.0.1:9", dnsmasq.nameserver], timeout: .seconds(2))
        #expect(try await resolver.lookupTXT("_atproto.alice.test") == ["did=did:plc:alice"])
    }

    @Test func nameserverParsing() throws {
        #expect(try DNSNameserver(parsing: "192.0.2.1").description == "192.0.2.1:53")
        #expect(try DNSNameserver(parsing: "192.0.2.1:5353").port == 5353)
        #expect(try DNSNameserver(parsing: "2001:db8::1").description == "[2001:db8::1]:53")
        #expect(try DNSNameserver(parsing: "[::1]:5353").host == "::1")
        #expect(throws: DNSError.self) { try DNSNameserver(parsing: "dns.example.com:53") }
        let conf = "# comment\nnameserver 10.0.0.1\nsearch example.com\nnameserver ::1\nnameserver fe80::1%eth0\n"
        #expect(DNSNameserver.fromResolvConf(contents: conf).map(\.description) == ["10.0.0.1:53", "[::1]:53"])
    }
}
