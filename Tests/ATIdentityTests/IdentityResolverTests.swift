import ATIdentity
import ATSyntax
import BlueskyHTTP
import BlueskyTesting
import Foundation
import Testing

/// The resolver's rules, with a fake HTTP side and a real dnsmasq for DNS.
@Suite("Identity resolution rules")
struct IdentityResolverTests {
    let alice = Handle("alice.example.com")!
    let aliceDID = DID("did:plc:aliceaaaaaaaaaaaaaaaaaaa")!
    let otherDID = DID("did:plc:otherbbbbbbbbbbbbbbbbbbb")!

    private func resolver(http: FakeHTTP, dnsmasq: Dnsmasq, cacheLifetime: Duration = .seconds(300)) throws -> IdentityResolver {
        IdentityResolver(http: http, dns: try DNSTXTResolver(nameservers: [dnsmasq.nameserver]),
                         plcURL: URL(string: "https://plc.example.com")!, cacheLifetime: cacheLifetime)
    }

    private func withoutDNSRecords() async throws -> Dnsmasq {
        try await Dnsmasq.start(txtRecords: [])
    }

    @Test func handleFromWellKnown() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: "\(aliceDID)\n")
        let dnsmasq = try await withoutDNSRecords()
        #expect(try await resolver(http: http, dnsmasq: dnsmasq).resolveHandle(alice) == aliceDID)
    }

    @Test func dnsWinsOverWellKnown() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: otherDID.description)
        let dnsmasq = try await Dnsmasq.start(txtRecords: [
            (name: "_atproto.alice.example.com", value: "did=\(aliceDID)"),
            (name: "_atproto.alice.example.com", value: "unrelated=txt"),
        ])
        #expect(try await resolver(http: http, dnsmasq: dnsmasq).resolveHandle(alice) == aliceDID)
    }

    @Test func severalDIDsInDNSIsAnError() async throws {
        let dnsmasq = try await Dnsmasq.start(txtRecords: [
            (name: "_atproto.alice.example.com", value: "did=\(aliceDID)"),
            (name: "_atproto.alice.example.com", value: "did=\(otherDID)"),
        ])
        await #expect(throws: IdentityError.self) {
            _ = try await self.resolver(http: FakeHTTP(), dnsmasq: dnsmasq).resolveHandle(alice)
        }
        let resolver = try self.resolver(http: FakeHTTP(), dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolveHandle(alice)
        } catch {
            guard case .severalDIDs(let handle, let dids) = error else {
                Issue.record("expected severalDIDs, got \(error)")
                return
            }
            #expect(handle == alice)
            #expect(Set(dids) == [aliceDID, otherDID])
        }
    }

    @Test func unknownHandleNamesWhatWasTried() async throws {
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: FakeHTTP(), dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolveHandle(alice)
            Issue.record("resolved an unknown handle")
        } catch {
            #expect(!error.isTransient)
            #expect(error.description.contains("_atproto.alice.example.com"))
            #expect(error.description.contains("https://alice.example.com/.well-known/atproto-did: HTTP 404"))
        }
    }

    @Test func unreachableWellKnownIsTransient() async throws {
        let http = FakeHTTP()
        http.fail("https://alice.example.com/.well-known/atproto-did",
                  with: .unreachable("https://alice.example.com/.well-known/atproto-did", reason: "connection refused"))
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: http, dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolveHandle(alice)
            Issue.record("resolved an unreachable handle")
        } catch {
            #expect(error.isTransient)
            #expect(error.description.contains("connection refused"))
        }
    }

    @Test func wellKnownBodyMustBeADID() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: "<html>hello</html>")
        let dnsmasq = try await withoutDNSRecords()
        await #expect(throws: IdentityError.self) {
            _ = try await self.resolver(http: http, dnsmasq: dnsmasq).resolveHandle(alice)
        }
    }

    @Test func resolveFromHandleIsVerifiedBothWays() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: aliceDID.description)
        http.serveJSON("https://plc.example.com/\(aliceDID)", didDocumentJSON(did: aliceDID.description, handle: "alice.example.com"))
        let dnsmasq = try await withoutDNSRecords()
        let identity = try await resolver(http: http, dnsmasq: dnsmasq).resolve(.handle(Handle("ALICE.example.com")!))
        #expect(identity.did == aliceDID)
        #expect(identity.handle == alice)
        #expect(identity.handleVerified)
        #expect(identity.pds == URL(string: "https://pds.example.com"))
    }

    @Test func handleNotClaimedByTheDocumentIsRejected() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: aliceDID.description)
        http.serveJSON("https://plc.example.com/\(aliceDID)", didDocumentJSON(did: aliceDID.description, handle: "mallory.example.com"))
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: http, dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolve(.handle(alice))
            Issue.record("accepted a handle the DID does not claim")
        } catch {
            #expect(error == .handleMismatch(handle: alice, did: aliceDID, documentHandle: Handle("mallory.example.com")))
        }
    }

    @Test func resolveFromDIDWithHandlePointingElsewhere() async throws {
        let http = FakeHTTP()
        http.serveJSON("https://plc.example.com/\(aliceDID)", didDocumentJSON(did: aliceDID.description, handle: "alice.example.com"))
        http.serve("https://alice.example.com/.well-known/atproto-did", text: otherDID.description)
        let dnsmasq = try await withoutDNSRecords()
        let identity = try await resolver(http: http, dnsmasq: dnsmasq).resolve(.did(aliceDID))
        #expect(identity.did == aliceDID)
        #expect(identity.handle == alice)
        #expect(!identity.handleVerified)
    }

    @Test func documentMustBeForTheDID() async throws {
        let http = FakeHTTP()
        http.serveJSON("https://plc.example.com/\(aliceDID)", didDocumentJSON(did: otherDID.description, handle: nil))
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: http, dnsmasq: dnsmasq)
        do {
            _ = try await resolver.resolveDID(aliceDID)
            Issue.record("accepted another DID's document")
        } catch {
            guard case .invalidDIDDocument = error else { Issue.record("unexpected \(error)"); return }
            #expect(error.description.contains(otherDID.description))
        }
    }

    @Test func documentWithoutPDSIsAnError() async throws {
        let http = FakeHTTP()
        let json = ##"{"id":"\##(aliceDID)","alsoKnownAs":["at://alice.example.com"],"service":[{"id":"#atproto_labeler","type":"AtprotoLabeler","serviceEndpoint":"https://l.example.com"}]}"##
        http.serveJSON("https://plc.example.com/\(aliceDID)", json)
        let dnsmasq = try await withoutDNSRecords()
        await #expect(throws: IdentityError.noPDS(aliceDID)) {
            _ = try await self.resolver(http: http, dnsmasq: dnsmasq).resolve(.did(aliceDID))
        }
    }

    @Test func didWebWithPortUsesTheHostOnly() async throws {
        let http = FakeHTTP()
        let did = DID("did:web:localhost%3A8443")!
        http.serveJSON("https://localhost:8443/.well-known/did.json", didDocumentJSON(did: did.description, handle: nil))
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: http, dnsmasq: dnsmasq)
        #expect(try await resolver.resolveDID(did).id == did)
        await #expect(throws: IdentityError.self) { _ = try await resolver.resolveDID(DID("did:web:example.com:user:alice")!) }
        await #expect(throws: IdentityError.unsupportedDIDMethod(DID("did:key:zabc")!)) {
            _ = try await resolver.resolveDID(DID("did:key:zabc")!)
        }
    }

    @Test func answersAreCachedUntilInvalidated() async throws {
        let http = FakeHTTP()
        http.serve("https://alice.example.com/.well-known/atproto-did", text: aliceDID.description)
        http.serveJSON("https://plc.example.com/\(aliceDID)", didDocumentJSON(did: aliceDID.description, handle: "alice.example.com"))
        let dnsmasq = try await withoutDNSRecords()
        let resolver = try self.resolver(http: http, dnsmasq: dnsmasq)
        _ = try await resolver.resolve(.handle(alice))
        let afterFirst = http.requestedURLs.count
        _ = try await resolver.resolve(.handle(alice))
        #expect(http.requestedURLs.count == afterFirst)
        resolver.invalidate(.handle(alice))
        resolver.invalidate(.did(aliceDID))
        _ = try await resolver.resolve(.handle(alice))
        #expect(http.requestedURLs.count == 2 * afterFirst)

        let uncached = try self.resolver(http: http, dnsmasq: dnsmasq, cacheLifetime: .zero)
        _ = try await uncached.resolve(.handle(alice))
        _ = try await uncached.resolve(.handle(alice))
        #expect(http.requestedURLs.count == 4 * afterFirst)
    }

    @Test func pdsEndpointSelection() throws {
        let json = #"""
        {"id":"did:plc:abc","alsoKnownAs":["https://x.example","at://bob.example.com","at://alt.example.com"],
         "service":[{"id":"#atproto_pds","type":"SomethingElse","serviceEndpoint":"https://wrong.example"},
                    {"id":"did:plc:abc#atproto_pds","type":"AtprotoPersonalDataServer","serviceEndpoint":"https://pds.example"}]}
        """#
        let document = try JSONDecoder().decode(DIDDocument.self, from: Data(json.utf8))
        #expect(document.pdsEndpoint == URL(string: "https://pds.example"))
        #expect(document.handle == Handle("bob.example.com"))
    }
}
