import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Testing

/// The export file: a registry written and read back whole; a file changed anywhere, cut short,
/// lengthened, of a later format or sealed with another key is refused whole.
@Suite("Export files", .timeLimit(.minutes(2)))
struct ExportFileTests {
    /// Writes `store`'s registry to `path` as `blueskyd store export` does.
    static func export(_ store: any AccountStore, to path: String, key: SymmetricKey) async throws {
        let writer = try ExportFileWriter(creating: path, storeKey: key)
        try writer.write(try await store.registryExtras())
        var after: AccountPageKey?
        while true {
            let page = try await store.portableAccounts(after: after, limit: 2)
            guard let last = page.last?.record else { break }
            try writer.write(page)
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
        try writer.finish()
    }

    /// Reads the whole file; the number of accounts.
    static func readAll(_ path: String, key: SymmetricKey) throws -> Int {
        let reader = try ExportFileReader(path: path, storeKey: key)
        defer { reader.close() }
        _ = try reader.extras()
        var accounts = 0
        while let batch = try reader.nextAccounts() { accounts += batch.count }
        return accounts
    }

    @Test("a registry exported (in parts of two accounts) and imported into an empty tenant is the same, field for field")
    func roundTrip() async throws {
        let key = SymmetricKey(size: .bits256)
        let source = try await StoreBackend.sqlite.open(key: key)
        _ = try await RegistryCopyTests.seed(source.store)
        let expected = try await RegistryCopyTests.contents(source.store)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("registry.export").path
        try await Self.export(source.store, to: path, key: key)
        #expect(try Fixtures.permissions(of: path) == 0o600)
        #expect(!(try Data(contentsOf: URL(fileURLWithPath: path))).contains("refresh-"), "no token in clear")
        await #expect(throws: ExportFileError.exists(path: path)) { try await Self.export(source.store, to: path, key: key) }

        let target = try await SharedTestDatabase.openStore(tenant: SharedTestDatabase.freshTenant(), key: SymmetricKey(size: .bits256))
        let reader = try ExportFileReader(path: path, storeKey: key)
        try await target.importRegistry(extras: try reader.extras()) { writer throws(StoreError) in
            do {
                while let batch = try reader.nextAccounts() { try await writer.write(batch) }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError.database(context: "importing", reason: "\(error)")
            }
        }
        reader.close()
        #expect(try await RegistryCopyTests.contents(target) == expected)
        await target.close()
        await source.close()
    }

    @Test("""
        a changed byte anywhere, a file cut short or lengthened, another key, a later format, a file that is not an \
        export: each refused, by name; an import from a file damaged in its last part writes nothing
        """)
    func refusals() async throws {
        let key = SymmetricKey(size: .bits256)
        let source = try await StoreBackend.sqlite.open(key: key)
        for _ in 0..<5 { try await source.store.insert(Fixtures.record(), secrets: Fixtures.secrets()) }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("good.export").path
        try await Self.export(source.store, to: path, key: key)
        #expect(try Self.readAll(path, key: key) == 5)
        let good = try Data(contentsOf: URL(fileURLWithPath: path))

        func variant(_ name: String, _ bytes: Data) throws -> String {
            let file = directory.url.appendingPathComponent(name).path
            try bytes.write(to: URL(fileURLWithPath: file))
            return file
        }
        func flipped(at offset: Int) -> Data {
            var bytes = good
            bytes[offset] ^= 0x01
            return bytes
        }
        // Every byte of the header and of the first and last parts, and a sample of the rest.
        var offsets = Array(0..<80) + Array((good.count - 80)..<good.count)
        offsets += stride(from: 80, to: good.count - 80, by: 37)
        for offset in offsets {
            let file = try variant("flipped-\(offset)", flipped(at: offset))
            #expect(throws: ExportFileError.self, "a byte changed at \(offset)") { try Self.readAll(file, key: key) }
        }
        #expect(throws: ExportFileError.notAnExport(path: try variant("magic", flipped(at: 0)))) {
            try Self.readAll(directory.url.appendingPathComponent("magic").path, key: key)
        }
        var later = good
        later[16] = ExportFile.formatVersion + 1
        let laterFile = try variant("later", later)
        #expect(throws: ExportFileError.laterFormat(path: laterFile, version: ExportFile.formatVersion + 1)) {
            try Self.readAll(laterFile, key: key)
        }
        #expect(throws: ExportFileError.anotherKey(path: path)) { try Self.readAll(path, key: SymmetricKey(size: .bits256)) }
        let cut = try variant("cut", good.prefix(good.count - 30))
        #expect(throws: ExportFileError.cutShort(path: cut)) { try Self.readAll(cut, key: key) }
        let longer = try variant("longer", good + Data([0]))
        #expect(throws: ExportFileError.self) { try Self.readAll(longer, key: key) }
        // Parts of one export under another's header (the same key, the same store): refused.
        let second = directory.url.appendingPathComponent("second.export").path
        try await Self.export(source.store, to: second, key: key)
        let spliced = try variant("spliced", try Data(contentsOf: URL(fileURLWithPath: second)).prefix(ExportFile.headerLength)
                                    + good.dropFirst(ExportFile.headerLength))
        #expect(throws: ExportFileError.self, "parts taken from another export") { try Self.readAll(spliced, key: key) }
        let text = try variant("text", Data("store_url = \"postgresql://db\"\n".utf8))
        #expect(throws: ExportFileError.notAnExport(path: text)) { try Self.readAll(text, key: key) }

        // Damaged in its last part: the accounts before it were read, and none is kept.
        let damaged = try variant("damaged-end", flipped(at: good.count - 1))
        let target = try await SharedTestDatabase.openStore(tenant: SharedTestDatabase.freshTenant(), key: key)
        let reader = try ExportFileReader(path: damaged, storeKey: key)
        await #expect(throws: StoreError.self) {
            try await target.importRegistry(extras: try reader.extras()) { writer throws(StoreError) in
                do {
                    while let batch = try reader.nextAccounts() { try await writer.write(batch) }
                } catch let error as StoreError {
                    throw error
                } catch {
                    throw StoreError.database(context: "importing", reason: "\(error)")
                }
            }
        }
        reader.close()
        #expect(try await target.count() == 0)
        await target.close()
        await source.close()
    }
}
