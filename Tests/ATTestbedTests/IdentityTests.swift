import ATTestbed
import Foundation
import Testing

@Suite("Testbed identity: TLS, PLC, handles")
struct IdentityTests {
    @Test("The generated CA verifies every virtual host over TLS")
    func certificateCoversHosts() async throws {
        try await TestbedHarness.with({ $0.domain = "tb7.test" }) { harness in
            for host in ["pds.tb7.test", "plc.tb7.test", "alice.tb7.test", "localhost"] {
                let connection = try await harness.connection(host: host)
                #expect(try await connection.send(.get("/")).status != 0)
                await connection.close()
            }
        }
    }

    @Test("Each testbed has its own CA: another testbed's CA does not verify it")
    func certificateAuthorityIsPerTestbed() async throws {
        try await TestbedHarness.with { first in
            try await TestbedHarness.with { second in
                #expect(first.testbed.caFile != second.testbed.caFile)
                let otherCA = second.testbed.caFile
                await #expect(throws: (any Error).self) {
                    let connection = try await TestHTTPSConnection.open(first.testbed, host: "pds.tb1.test", trusting: otherCA)
                    _ = try await connection.send(.get("/"))
                }
            }
        }
    }

    @Test("The PLC directory serves did:plc documents and 404s unknown DIDs")
    func plcDocuments() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "alice"))
            #expect(account.did.wholeMatch(of: /did:plc:[a-z2-7]{24}/) != nil)
            let plc = try await harness.connection(host: "plc.tb1.test")
            let document = try await plc.send(.get("/\(account.did)"))
            #expect(document.status == 200)
            #expect(document["id"] == account.did)
            #expect(document.json["alsoKnownAs"] as? [String] == ["at://alice.tb1.test"])
            let service = (document.json["service"] as? [[String: any Sendable]])?.first
            #expect(service?["id"] as? String == "#atproto_pds")
            #expect(service?["type"] as? String == "AtprotoPersonalDataServer")
            #expect(service?["serviceEndpoint"] as? String == harness.testbed.pdsURL)
            let method = (document.json["verificationMethod"] as? [[String: any Sendable]])?.first
            #expect((method?["publicKeyMultibase"] as? String)?.hasPrefix("z") == true)

            let unknown = try await plc.send(.get("/did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"))
            #expect(unknown.status == 404)
            #expect(unknown["message"] == "DID not registered: did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
            await plc.close()
        }
    }

    @Test("Handle hosts answer /.well-known/atproto-did only when published")
    func wellKnown() async throws {
        try await TestbedHarness.with { harness in
            let alice = await harness.testbed.createAccount(AccountSpec(name: "alice"))
            _ = await harness.testbed.createAccount(AccountSpec(name: "hidden", publishWellKnown: false))
            let aliceHost = try await harness.connection(host: "alice.tb1.test")
            let answer = try await aliceHost.send(.get("/.well-known/atproto-did"))
            #expect(answer.status == 200)
            #expect(answer.text == alice.did)
            #expect(answer.headers.first(name: "content-type")?.hasPrefix("text/plain") == true)
            let hiddenHost = try await harness.connection(host: "hidden.tb1.test")
            #expect(try await hiddenHost.send(.get("/.well-known/atproto-did")).status == 404)
            await aliceHost.close()
            await hiddenHost.close()
        }
    }

    @Test("did:web accounts are documented at their handle host")
    func didWeb() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "webby", didMethod: .web))
            #expect(account.did == "did:web:webby.tb1.test%3A\(harness.testbed.port)")
            let host = try await harness.connection(host: "webby.tb1.test")
            let document = try await host.send(.get("/.well-known/did.json"))
            #expect(document["id"] == account.did)
            await host.close()
        }
    }

    @Test("documentHandle and setHandle change what the DID document claims")
    func handleClaims() async throws {
        try await TestbedHarness.with { harness in
            let liar = await harness.testbed.createAccount(AccountSpec(name: "liar", documentHandle: "someone.else.test"))
            let plc = try await harness.connection(host: "plc.tb1.test")
            #expect(try await plc.send(.get("/\(liar.did)")).json["alsoKnownAs"] as? [String] == ["at://someone.else.test"])

            harness.testbed.setHandle(did: liar.did, handle: "renamed.tb1.test")
            #expect(try await plc.send(.get("/\(liar.did)")).json["alsoKnownAs"] as? [String] == ["at://renamed.tb1.test"])
            let newHost = try await harness.connection(host: "renamed.tb1.test")
            #expect(try await newHost.send(.get("/.well-known/atproto-did")).text == liar.did)
            let oldHost = try await harness.connection(host: "liar.tb1.test")
            #expect(try await oldHost.send(.get("/.well-known/atproto-did")).status == 404)
            #expect(harness.testbed.accounts.first?.handle == "renamed.tb1.test")
            for connection in [plc, newHost, oldHost] { await connection.close() }
        }
    }

    @Test("An unknown host is misdirected")
    func unknownHost() async throws {
        try await TestbedHarness.with { harness in
            let connection = try await harness.connection(host: "localhost")
            #expect(try await connection.send(.get("/xrpc/com.atproto.server.describeServer")).status == 421)
            await connection.close()
        }
    }
}
