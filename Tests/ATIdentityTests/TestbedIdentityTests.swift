import ATIdentity
import ATSyntax
import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import Foundation
import Testing

/// The resolver against the testbed's real PLC directory, handle hosts and did:web documents,
/// over HTTPS with the testbed's CA, inside the hermetic network.
@Suite("Identity resolution against the testbed", .serialized)
struct TestbedIdentityTests {
    /// One testbed, an HTTPS client trusting its CA, and a dnsmasq for `_atproto` TXT records.
    struct Fixture {
        let testbed: Testbed
        let http: OutboundHTTP
        let directory: String

        static func start() async throws -> Fixture {
            try HermeticNetwork.require()
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("identity-\(UUID().uuidString.prefix(8))").path
            let testbed = try await Testbed.startInHermeticNetwork(directory: directory)
            let http = try OutboundHTTP(.init(extraCAFile: testbed.caFile))
            return Fixture(testbed: testbed, http: http, directory: directory)
        }

        func resolver(dnsmasq: Dnsmasq) throws -> IdentityResolver {
            IdentityResolver(http: http, dns: try DNSTXTResolver(nameservers: [dnsmasq.nameserver]),
                             plcURL: try #require(URL(string: testbed.plcURL)))
        }

        func stop() async {
            try? await http.shutdown()
            try? await testbed.shutdown()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test func handleViaWellKnownAndDIDPLC() async throws {
        let fixture = try await Fixture.start()
        let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
        let dnsmasq = try await Dnsmasq.start(txtRecords: [])
        let identity = try await fixture.resolver(dnsmasq: dnsmasq).resolve(ATIdentifier(parsing: account.handle))
        #expect(identity.did.description == account.did)
        #expect(identity.did.method == .plc)
        #expect(identity.handle?.description == account.handle)
        #expect(identity.handleVerified)
        #expect(identity.pds.absoluteString.hasPrefix(fixture.testbed.pdsURL))
        await fixture.stop()
    }

    @Test func handleViaDNSTXT() async throws {
        let fixture = try await Fixture.start()
        let account = await fixture.testbed.createAccount(AccountSpec(name: "dnsonly", publishWellKnown: false))
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.\(account.handle)", value: "did=\(account.did)")])
        let resolver = try fixture.resolver(dnsmasq: dnsmasq)
        let identity = try await resolver.resolve(ATIdentifier(parsing: account.handle))
        #expect(identity.did.description == account.did)
        #expect(identity.handleVerified)

        // Without the TXT record the handle is unknown: the well-known is not published.
        let empty = try await Dnsmasq.start(txtRecords: [])
        await #expect(throws: IdentityError.self) {
            _ = try await fixture.resolver(dnsmasq: empty).resolveHandle(Handle(validating: account.handle))
        }
        await fixture.stop()
    }

    @Test func didWebFromDIDAndFromHandle() async throws {
        let fixture = try await Fixture.start()
        let account = await fixture.testbed.createAccount(AccountSpec(name: "webby", didMethod: .web))
        let dnsmasq = try await Dnsmasq.start(txtRecords: [])
        let resolver = try fixture.resolver(dnsmasq: dnsmasq)
        let fromDID = try await resolver.resolve(ATIdentifier(parsing: account.did))
        #expect(fromDID.did.method == .web)
        #expect(fromDID.handle?.description == account.handle)
        #expect(fromDID.handleVerified)
        let fromHandle = try await resolver.resolve(ATIdentifier(parsing: account.handle))
        #expect(fromHandle == fromDID)
        await fixture.stop()
    }

    @Test func documentClaimingAnotherHandle() async throws {
        let fixture = try await Fixture.start()
        let mallory = await fixture.testbed.createAccount(
            AccountSpec(name: "mallory", documentHandle: "victim.\(fixture.testbed.configuration.domain)"))
        let dnsmasq = try await Dnsmasq.start(txtRecords: [])
        let resolver = try fixture.resolver(dnsmasq: dnsmasq)

        // Logging in by handle: the handle does not belong to that DID.
        let malloryHandle = try ATIdentifier(parsing: mallory.handle)
        do {
            _ = try await resolver.resolve(malloryHandle)
            Issue.record("accepted a handle its DID document does not claim")
        } catch {
            guard case .handleMismatch(let handle, let did, _) = error else { Issue.record("unexpected \(error)"); return }
            #expect(handle.description == mallory.handle)
            #expect(did.description == mallory.did)
        }
        // By DID: the DID stays the identity, the claimed handle is marked unverified.
        let identity = try await resolver.resolve(ATIdentifier(parsing: mallory.did))
        #expect(identity.did.description == mallory.did)
        #expect(identity.handle?.description == "victim.\(fixture.testbed.configuration.domain)")
        #expect(!identity.handleVerified)
        await fixture.stop()
    }

    @Test func dnsWinsOverWellKnownOnConflict() async throws {
        let fixture = try await Fixture.start()
        let alice = await fixture.testbed.createAccount(AccountSpec(name: "conflicted"))
        let bob = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
        // alice's well-known says alice's DID, DNS says bob's: DNS wins.
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.\(alice.handle)", value: "did=\(bob.did)")])
        let resolver = try fixture.resolver(dnsmasq: dnsmasq)
        #expect(try await resolver.resolveHandle(Handle(validating: alice.handle)).description == bob.did)
        // ... and bob's document does not claim alice's handle, so the login is refused.
        await #expect(throws: IdentityError.self) {
            _ = try await resolver.resolve(ATIdentifier(parsing: alice.handle))
        }
        await fixture.stop()
    }

    @Test func unknownDIDIsNotFound() async throws {
        let fixture = try await Fixture.start()
        let dnsmasq = try await Dnsmasq.start(txtRecords: [])
        let did = try DID(validating: "did:plc:zzzzzzzzzzzzzzzzzzzzzzzz")
        let resolver = try fixture.resolver(dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolveDID(did)
            Issue.record("resolved an unknown DID")
        } catch {
            guard case .didDocumentNotFound = error else { Issue.record("unexpected \(error)"); return }
            #expect(!error.isTransient)
        }
        await fixture.stop()
    }
}
