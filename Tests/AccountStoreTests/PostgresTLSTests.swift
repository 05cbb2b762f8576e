import ATTestbed
import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Testing

/// The store's connection to PostgreSQL over TLS, as `sslmode` and `sslrootcert` in `store_url`
/// ask, against a server that admits TCP clients over TLS only (`hostssl`).
@Suite("PostgreSQL store over TLS")
struct PostgresTLSTests {
    /// A TLS-only server with a certificate for 127.0.0.1 from a throwaway CA, its `ca.pem`,
    /// another CA's `ca.pem`, and a database `tls` owned by `tls`.
    struct TLSServer {
        let server: PostgresServer
        let scratch: TemporaryDirectory
        let caFile: String
        let otherCAFile: String

        init() throws {
            scratch = try TemporaryDirectory()
            let certificates = try TestbedCertificates(domain: "db.test", bindAddress: "127.0.0.1")
            caFile = try certificates.writeCA(toDirectory: scratch.path + "/ca")
            otherCAFile = try TestbedCertificates(domain: "other.test", bindAddress: "127.0.0.1")
                .writeCA(toDirectory: scratch.path + "/other")
            server = try PostgresServer.start(tls: .init(certificatePEM: certificates.serverCertificatePEM,
                                                         privateKeyPEM: certificates.serverPrivateKeyPEM))
            try server.createDatabase("tls", owner: "tls", password: "pw")
        }

        func open(_ query: String) async throws -> PostgresAccountStore {
            let settings = try PostgresStoreSettings(url: server.url(user: "tls", database: "tls") + "?" + query,
                                                     password: "pw", tenant: "tls")
            return try await PostgresAccountStore(settings: settings, key: SymmetricKey(size: .bits256), hostName: "tls-host",
                                                  logger: Fixtures.logger)
        }

        func destroy() {
            server.destroy()
            scratch.remove()
        }
    }

    /// Opening the store fails, and the message names `expected`.
    static func refused(_ server: TLSServer, _ query: String, saying expected: String) async {
        do {
            let store = try await server.open(query)
            await store.close()
            Issue.record("\(query): the store opened")
        } catch {
            let message = "\(error)"
            #expect(message.contains("cannot reach the account database") && message.lowercased().contains(expected),
                    "\(query): \(message)")
        }
    }

    @Test("""
        verify-full with the server's CA: accounts are written and read over TLS; another CA is refused \
        under verify-ca and verify-full, accepted under require (libpq checks nothing there); no TLS is refused
        """)
    func sslModes() async throws {
        let tls = try await offThePool { try TLSServer() }
        defer { tls.destroy() }
        do {
            let store = try await tls.open("sslmode=verify-full&sslrootcert=\(tls.caFile)")
            let record = Fixtures.record()
            try await store.insert(record, secrets: Fixtures.secrets())
            #expect(try await store.account(id: record.id) == record)
            await store.close()

            await Self.refused(tls, "sslmode=verify-full&sslrootcert=\(tls.otherCAFile)", saying: "certificate")
            await Self.refused(tls, "sslmode=verify-ca&sslrootcert=\(tls.otherCAFile)", saying: "certificate")
            await Self.refused(tls, "sslmode=disable", saying: "no encryption")
            let unverified = try await tls.open("sslmode=require&sslrootcert=\(tls.otherCAFile)")
            #expect(try await unverified.account(id: record.id)?.did == record.did)
            await unverified.close()
        }
    }
}
