import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Someone who can write the database but holds no store key points accounts at their own
/// server and tells the host: no token leaves for it, and the accounts need a new login.
@Suite("Several hosts: a tenant's own role, and rows rewritten behind blueskyd's back")
struct RewrittenRowTests {
    @Test("""
        a host connected as its tenant's own role (row-level security) sees its accounts only; an app-password and an \
        OAuth account whose PDS and token endpoint are rewritten in the database (an unsigned NOTIFY sent) go on \
        calling their own servers until a restart, then need a login; no request reaches the new server; a new login \
        mends the account; the reseal attack (marker deleted, PDS changed, seal cleared, restart) sends nothing, and \
        store reseal refuses the row; a row with a state blueskyd cannot read is tampered, the host starts
        """, .timeLimit(.minutes(4)))
    func rewrittenRowSendsNothing() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-rewritten")
        let database = try await offThePool { try PostgresServer.start() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            config.accessTokenLifetime = .seconds(3600)
            config.oauthAccessTokenLifetime = .seconds(3600)
        }
        // pds.tb63.test and auth.tb63.test resolve to 127.0.0.63 in the hermetic network, a slot
        // no testbed takes (SharedStoreDeadServerTests holds 64).
        let intruder = try await BlackHole.start(host: "127.0.0.63", port: 443)
        var host: DaemonProcess?
        var seeding: SeededSharedStore?
        try await withTearDown {
            await host?.stop()
            await seeding?.close()
            await intruder.stop()
            try? await testbed.shutdown()
            database.destroy()
            directory.remove()
        } run: {
            // The owner creates the schema; tenants "alice" and "bob" get roles of their own and
            // seed their accounts as those roles (row-level security holds the owner to its own).
            let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(on: database)
            let owner = try await SeededSharedStore(url: ownerURL, password: ownerPassword, tenant: SharedStoreHosts.ownerTenant,
                                                    keyDirectory: directory.file("owner"))
            await owner.close()
            let rolePassword = try SharedStoreHosts.createTenantRole("alice", in: "blueskyd", on: database)
            let bobPassword = try SharedStoreHosts.createTenantRole("bob", in: "blueskyd", on: database)
            let aliceURL = database.url(user: "alice", database: "blueskyd") + "?sslmode=disable"
            let store = try await SeededSharedStore(url: aliceURL, password: rolePassword, tenant: "alice",
                                                    keyDirectory: directory.file("seeding"))
            seeding = store
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth0"], accessExpiresAt: Date().addingTimeInterval(3600))
            let oauthID = try #require(try await store.write(count: 1, account: { _ in
                SeededOAuthAccounts.account(minted[0].session, key: minted[0].key, isDefault: false,
                                            issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL, issuedAt: Date())
            }, due: { _ in .distantFuture }).first)
            await store.close()
            let neighbour = try await SeededSharedStore(url: database.url(user: "bob", database: "blueskyd") + "?sslmode=disable",
                                                        password: bobPassword, tenant: "bob", keyDirectory: directory.file("seeding-bob"))
            let bobsAccount = try SeededOAuthAccounts.mint(at: testbed, names: ["bob0"], accessExpiresAt: Date().addingTimeInterval(3600))
            try await neighbour.write(count: 1, account: { _ in
                SeededOAuthAccounts.account(bobsAccount[0].session, key: bobsAccount[0].key, isDefault: false,
                                            issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL, issuedAt: Date())
            }, due: { _ in .distantFuture })
            await neighbour.close()
            seeding = nil
            let config = try SharedStoreHosts.writeConfiguration(
                in: directory.path, url: aliceURL,
                password: rolePassword, tenant: "alice", extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            host = try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: store.keyHex, config: config, testbed: testbed)
            let daemon = try #require(host)

            var spec = AccountSpec(name: "app0")
            spec.publishWellKnown = true
            let appAccount = await testbed.createAccount(spec)
            let added = try await daemon.call("accounts.add", ["identifier": .string(appAccount.did),
                                                              "password": .string(appAccount.appPassword)])
            let appID = try #require(added["account"]?["id"]?.stringValue)
            let ids = [appID, oauthID.uuidString.lowercased()]
            #expect(try await daemon.call("daemon.status")["accounts"]?.intValue == 2, "tenant bob's account is not alice's")
            // Everything a host does works under its tenant's role: claims, saves, nonces, liveness.
            for id in ids { _ = try await daemon.call("accounts.refresh", ["account": .string(id), "force": true]) }

            _ = try database.psql("""
                UPDATE account SET pds = 'https://pds.tb63.test' WHERE tenant = 'alice';
                UPDATE account SET oauth_token_endpoint = 'https://auth.tb63.test/oauth/token' WHERE tenant = 'alice' AND oauth_issuer IS NOT NULL;
                SELECT pg_notify('blueskyd_accounts', 'alice intruder/0 ' || id) FROM account WHERE tenant = 'alice';
                """, database: "blueskyd")
            // The NOTIFY on the channel every host once shared, unsigned, is heard by no host:
            // the running one keeps what it read through a seal that held, and its calls still
            // go to the accounts' own servers.
            for did in [appAccount.did, minted[0].session.did] {
                let reply = try await daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(did),
                                                                "params": ["actor": .string(did)]])
                #expect(reply["status"] == 200, "\(reply)")
            }

            // A restart reads the rows afresh: the seal fails, and nothing is sent.
            await daemon.stop()
            host = try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: store.keyHex, config: config, testbed: testbed)
            let restarted = try #require(host)
            // Listed as the row says (as store reseal shows it), needing a login.
            try await expectNeedsLogin(restarted, ids, pds: "https://pds.tb63.test")
            try await expectRefused(restarted, [appAccount.did, minted[0].session.did], ids)
            #expect(intruder.connections == 0, "no request left for the server the rows were pointed at")

            // A new login writes the account afresh, sealed: it works again.
            _ = try await restarted.call("accounts.add", ["identifier": .string(appAccount.did),
                                                          "password": .string(appAccount.appPassword)])
            let view = try await restarted.call("accounts.list")["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == appID }
            #expect(view?["state"] == "active" && view?["pds"]?.stringValue == testbed.pdsURL, "\(view ?? .null)")
            let reply = try await restarted.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(appAccount.did),
                                                               "params": ["actor": .string(appAccount.did)]])
            #expect(reply["status"] == 200)
            #expect(intruder.connections == 0)

            // The reseal attack, on a row that works (sealed, active) while its host is stopped:
            // the tenant's "sealed" marker deleted, the row pointed at the intruder, its seal
            // cleared. A start once sealed such a row with the real key, and its tokens went to
            // the intruder; now no start seals anything.
            await restarted.stop()
            // And the other row, already failing, given the first one's verified handle and the default.
            let appHandle = appAccount.handle
            _ = try database.psql("""
                DELETE FROM blueskyd_tenant_sealed WHERE tenant = 'alice';
                UPDATE account SET pds = 'https://pds.tb63.test', metadata_seal = NULL, is_default = false WHERE id = '\(appID)';
                UPDATE account SET handle = '\(appHandle)', handle_verified = true, is_default = true WHERE id = '\(oauthID)';
                """, database: "blueskyd")
            host = try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: store.keyHex, config: config, testbed: testbed)
            let third = try #require(host)
            try await expectRefused(third, [appAccount.did], [appID])
            let tampered = try await third.call("daemon.status")["tampered"]
            #expect(tampered?["count"]?.intValue == 2 && tampered?["unsealed"]?.intValue == 1, "\(tampered ?? .null)")
            // Neither the handle nor "default" picks a row whose seal does not hold.
            for account: JSONValue in [.string("@" + appHandle), .null] {
                do {
                    _ = try await third.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": account,
                                                           "params": ["actor": .string(appAccount.did)]])
                    Issue.record("a call naming \(account) must fail")
                } catch let error as RPCError {
                    #expect(error.name == (account == .null ? "NoDefaultAccount" : "AccountNotFound"), "\(error)")
                }
            }
            let views = try await third.call("accounts.list")["accounts"]?.arrayValue ?? []
            let attacked = views.first { $0["id"]?.stringValue == appID }
            #expect(attacked?["state"] == "needs-login" && attacked?["stateReason"]?.stringValue?.contains("changed outside blueskyd") == true,
                    "\(attacked ?? .null)")
            #expect(intruder.connections == 0, "a restart after the seal was cleared sent nothing")
            // Nor does the operator's reseal: the row's secrets say it had a seal.
            let reseal = try await CommandResult.run(Binaries.path("blueskyd"), [
                "store", "reseal", "--config", config, "--state-directory", directory.path + "/host0/state", "--all", "--json"])
            #expect(reseal.status == 0, "\(reseal.stderr)")
            let report = try #require(try? JSONValue.parse(Array(reseal.stdout.utf8)), "\(reseal.stdout)")
            #expect(report["sealed"]?.intValue == 0, "\(report)")
            let listed = report["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == appID }
            #expect(listed?["finding"] == "seal-removed" && listed?["pds"] == "https://pds.tb63.test", "\(report)")
            try await expectRefused(third, [appAccount.did], [appID])
            #expect(intruder.connections == 0)

            // A value blueskyd cannot read (an unknown state) stopped every start of the tenant
            // with "cannot load the accounts": now that row alone is tampered.
            await third.stop()
            _ = try database.psql("UPDATE account SET state = 'bogus' WHERE id = '\(oauthID.uuidString.lowercased())'",
                                  database: "blueskyd")
            host = try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: store.keyHex, config: config, testbed: testbed)
            let fourth = try #require(host)
            #expect(try await fourth.call("daemon.status")["tampered"]?["count"]?.intValue == 2)
            try await expectRefused(fourth, [minted[0].session.did], [oauthID.uuidString.lowercased()])
            #expect(intruder.connections == 0)
        }
    }

    private func expectNeedsLogin(_ daemon: DaemonProcess, _ ids: [String], pds: String) async throws {
        try await waitUntil("both accounts need a login", timeout: .seconds(30)) {
            let views = try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? []
            return ids.allSatisfy { id in views.contains { $0["id"]?.stringValue == id && $0["state"] == "needs-login" } }
        }
        for view in try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? [] {
            #expect(view["stateReason"]?.stringValue?.contains("changed outside blueskyd") == true, "\(view)")
            #expect(view["pds"]?.stringValue == pds, "\(view)")
        }
    }

    private func expectRefused(_ daemon: DaemonProcess, _ dids: [String], _ ids: [String]) async throws {
        for did in dids {
            do {
                _ = try await daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(did),
                                                        "params": ["actor": .string(did)]])
                Issue.record("a call for a rewritten account must fail")
            } catch let error as RPCError {
                #expect(error.name == "NeedsLogin", "\(error)")
            }
        }
        for id in ids {
            await #expect(throws: RPCError.self) {
                try await daemon.call("accounts.refresh", ["account": .string(id), "force": true])
            }
        }
    }
}
