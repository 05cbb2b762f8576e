import AccountStoreCore
import BlueskyTesting
import Crypto
import DaemonHarness
import Foundation
import PostgresStore
import Testing

/// A write whose answer is lost after its COMMIT went out is read back before it answers.
@Suite("A deadline after COMMIT", .timeLimit(.minutes(2)))
struct CommitReadBackTests {
    @Test("an insert whose commit outlasts the deadline (the database commits all the same) answers success, read back; the account is not inserted twice")
    func insertReadBack() async throws {
        let server = try await SharedTestDatabase.server
        let tenant = SharedTestDatabase.freshTenant()
        let name = "slow_commit_" + tenant.replacingOccurrences(of: "-", with: "_")
        var settings = try await SharedTestDatabase.settings(tenant: tenant)
        settings.statementTimeout = 1
        let store = try await PostgresAccountStore(settings: settings, key: SymmetricKey(size: .bits256), hostName: "slow-commit",
                                                   logger: Fixtures.logger)
        // COMMIT runs a deferred trigger that sleeps past the 1-s deadline; the client has given
        // up and closed its connection by then, and PostgreSQL commits anyway.
        // Off the cooperative pool: CREATE TRIGGER waits for the other tests' writes to end, and
        // their transactions need the pool to end. The trigger stays (dropping it would lock the
        // table whole); its WHEN names this test's tenant alone.
        _ = try await offThePool {
            try server.psql("""
                CREATE FUNCTION \(name)() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2.5); RETURN NULL; END $$;
                CREATE CONSTRAINT TRIGGER \(name) AFTER INSERT ON account DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW WHEN (NEW.tenant = '\(tenant)') EXECUTE FUNCTION \(name)();
                """, database: SharedTestDatabase.database)
        }
        let record = Fixtures.record()
        let secrets = Fixtures.secrets()
        try await store.insert(record, secrets: secrets)
        #expect(try await store.account(id: record.id) == record)
        #expect(try await store.secrets(for: record.id) == secrets)
        // A second insert of the same account is what a caller told "failed" would have tried.
        await #expect(throws: StoreError.self) { try await store.insert(record, secrets: Fixtures.secrets()) }
        #expect(try await store.count() == 1)
        await store.close()
    }
}
