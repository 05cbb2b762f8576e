@testable import AccountStoreCore
import Foundation
import Testing

@Suite("State directory and instance lock")
struct StateDirectoryTests {
    @Test("resolves XDG_STATE_HOME, then ~/.local/state, and an explicit path wins")
    func resolution() async throws {
        #expect(try StateDirectory.resolve(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/home/u"]).path
            == "/x/state/blueskyd")
        #expect(try StateDirectory.resolve(environment: ["HOME": "/home/u"]).path == "/home/u/.local/state/blueskyd")
        #expect(try StateDirectory.resolve(environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/u"]).path
            == "/home/u/.local/state/blueskyd")
        #expect(try StateDirectory.resolve(explicitPath: "/srv/bsky", environment: ["XDG_STATE_HOME": "/x"]).path
            == "/srv/bsky")
    }

    @Test("the directory is created with mode 0700")
    func createdPrivate() async throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let state = try StateDirectory(environment: ["XDG_STATE_HOME": parent.path])
        #expect(state.url.path == parent.appending("blueskyd").path)
        #expect(try Fixtures.permissions(of: state.url.path) == 0o700)
    }

    @Test("a second lock attempt fails while the first is held, and succeeds after release")
    func lockIsExclusiveInProcess() async throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let state = try StateDirectory(path: parent.appending("blueskyd"))
        let lock = try state.acquireInstanceLock()

        let error = await #expect(throws: StoreError.self) { try state.acquireInstanceLock() }
        #expect(error == .alreadyRunning(pid: getpid(), directory: state.url.path))
        #expect(error?.description == "another blueskyd (pid \(getpid())) is already using \(state.url.path)")

        lock.release()
        #expect(!lock.isHeld)
        let again = try state.acquireInstanceLock()
        #expect(again.isHeld)
        #expect(try Fixtures.permissions(of: state.lockFile.path) == 0o600)
    }

    @Test("another process cannot take the lock while it is held",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/flock")))
    func lockSeenByChildProcess() async throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let state = try StateDirectory(path: parent.appending("blueskyd"))
        let lock = try state.acquireInstanceLock()
        #expect(try Self.flockNonBlocking(state.lockFile.path) != 0)
        #expect(String(decoding: FileManager.default.contents(atPath: state.lockFile.path) ?? Data(), as: UTF8.self)
            == "\(getpid())\n")

        lock.release()
        #expect(try Self.flockNonBlocking(state.lockFile.path) == 0)
    }

    @Test("the directory a file is in, for any name: a bare one-character name traps Foundation (store export --to e did)")
    func directoryOfAPath() {
        #expect(PrivateFiles.directory(of: "e") == ".")
        #expect(PrivateFiles.directory(of: "export") == ".")
        #expect(PrivateFiles.directory(of: "/e") == "/")
        #expect(PrivateFiles.directory(of: "./e") == ".")
        #expect(PrivateFiles.directory(of: "a/b") == "a")
        #expect(PrivateFiles.directory(of: "/var/lib/x/store.key") == "/var/lib/x")
    }

    @Test("taking the lock removes the key temporaries and the unfinished store a killed process left, and nothing else")
    func abandonedKeyFiles() throws {
        let parent = try TemporaryDirectory()
        let state = try StateDirectory(path: parent.appending("blueskyd"))
        for name in ["store.key.new-1-2", "store.key.next.new-3-4", "store.key", "store.key.next", "accounts.sqlite"] {
            #expect(FileManager.default.createFile(atPath: state.url.appendingPathComponent(name).path, contents: Data([1]),
                                                   attributes: [.posixPermissions: 0o600]))
        }
        try FileManager.default.createDirectory(atPath: state.url.appendingPathComponent(".copy-1234/inner").path,
                                                withIntermediateDirectories: true)
        let lock = try state.acquireInstanceLock()
        defer { lock.release() }
        let left = try FileManager.default.contentsOfDirectory(atPath: state.url.path).filter { $0 != "blueskyd.lock" }.sorted()
        #expect(left == ["accounts.sqlite", "store.key", "store.key.next"])
    }

    /// Runs `flock -n <path> true` (util-linux) and returns its exit status.
    private static func flockNonBlocking(_ path: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        process.arguments = ["-n", path, "true"]
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
