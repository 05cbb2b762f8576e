import DaemonHarness
import Foundation
import WebBasics

/// Section 14: the registry moved. 100,000 app-password accounts in a SQLite store are copied
/// into a PostgreSQL tenant and back, exported and imported, each store rekeyed, and the tenant rekeyed again while a
/// host of it runs, each by the real `blueskyd store`
/// command, timed, with the command's peak memory (VmHWM, sampled every 50 ms): a registry is
/// read and written a page at a time, so the peak stays flat however many accounts.
struct RegistryBench {
    static let section = "registry"
    /// Each step's target (issue 27): under a minute for 100,000 accounts.
    static let targetSeconds = 60.0
    /// Seeding, starting PostgreSQL and six steps, with room.
    static func timeBudget(_ options: BenchOptions) -> Double { 900 }

    let options: BenchOptions
    let workDirectory: String
    let progress: ProgressLog

    func run() async -> RegistryResult {
        var result = RegistryResult(accounts: options.registryAccounts)
        let directory = workDirectory + "/registry"
        var server: PostgresServer?
        do {
            // Traversable: PostgreSQL runs as its own user when the bench runs as root.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
            let source = directory + "/source/state"
            progress.say("registry: writing \(result.accounts) accounts into a SQLite store")
            try await FakeAccounts.seed(stateDirectory: source, count: result.accounts, pdsURL: "https://pds.bench.test")
            let started = try PostgresServer.start(in: directory + "/postgres")
            server = started
            let (url, password) = try SharedStoreHosts.createDatabase(on: started)
            await (try await SeededSharedStore(url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                                               keyDirectory: directory + "/owner")).close()
            let config = try SharedStoreHosts.writeConfiguration(in: directory, url: url, password: password,
                                                                 tenant: SharedStoreHosts.ownerTenant)
            let empty = directory + "/empty.toml"
            try "".write(toFile: empty, atomically: true, encoding: .utf8)
            let local = ["--config", empty, "--state-directory", source]
            let steps: [(String, [String])] = [
                ("copy SQLite → PostgreSQL", ["store", "copy"] + local + [
                    "--to", url, "--to-tenant", SharedStoreHosts.ownerTenant, "--to-password-file", directory + "/store-password"]),
                ("copy PostgreSQL → SQLite", ["store", "copy", "--config", config, "--state-directory", source,
                                              "--to", directory + "/back/state"]),
                ("export (SQLite)", ["store", "export"] + local + ["--to", directory + "/registry.export"]),
                ("import (into a new SQLite store)", ["store", "import", "--config", empty, "--state-directory",
                                                      directory + "/restored/state", "--from", directory + "/registry.export",
                                                      "--key-file", source + "/store.key"]),
                // On the copies: a rekey replaces its state directory's store.key.
                ("rekey (SQLite)", ["store", "rekey", "--config", empty, "--state-directory", directory + "/back/state",
                                    "--new-key-file", try Self.newKey(directory + "/new-sqlite.key")]),
                ("rekey (PostgreSQL)", ["store", "rekey", "--config", config, "--state-directory",
                                        try Self.hostState(directory + "/host/state", key: source + "/store.key"),
                                        "--new-key-file", try Self.newKey(directory + "/new-postgres.key")]),
            ]
            for (name, arguments) in steps {
                progress.say("registry: \(name)")
                result.steps.append(try await Self.measure(name, arguments + ["--json"], expecting: result.accounts))
            }
            // The tenant rekeyed again while a host of it runs, holding the next key beside its own.
            let name = "rekey while a host runs (PostgreSQL)"
            progress.say("registry: \(name)")
            let current = try String(contentsOfFile: directory + "/new-postgres.key", encoding: .utf8)
            let next = try Self.newKey(directory + "/new-online.key")
            let hostState = directory + "/running/host0/state"
            try SharedStoreHosts.provisionKey(current, stateDirectory: hostState)
            try FileManager.default.copyItem(atPath: next, toPath: hostState + "/store.key.new")
            let host = try await SharedStoreHosts.startHost(0, in: directory + "/running", keyHex: current, config: config, testbed: nil,
                                                            readyTimeout: .seconds(180))
            do {
                result.steps.append(try await Self.measure(name, ["store", "rekey", "--config", config, "--state-directory",
                                                                  directory + "/host/state", "--new-key-file", next, "--json"],
                                                           expecting: result.accounts))
            } catch {
                await host.stop()
                throw error
            }
            await host.stop()
        } catch {
            result.error = describe(error)
        }
        server?.destroy()
        return result
    }

    /// Runs one `blueskyd store` command to its end, sampling its peak memory meanwhile.
    static func measure(_ name: String, _ arguments: [String], expecting accounts: Int) async throws -> RegistryResult.Step {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("blueskyd"))
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let started = ContinuousClock.now
        try process.run()
        var peakKiB = 0
        while process.isRunning {
            if let peak = Self.peakKiB(process.processIdentifier) { peakKiB = max(peakKiB, peak) }
            try await Task.sleep(for: .milliseconds(50))
        }
        let elapsed = ContinuousClock.now - started
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw BenchError.storeFailed("\(name): exit \(process.terminationStatus): \(stderr)")
        }
        let counted = stdout.contains("\"copied\":\(accounts)") || stdout.contains("\"accounts\":\(accounts)")
            || stdout.contains("\"resealed\":\(accounts)")
        guard counted else { throw BenchError.storeFailed("\(name): \(accounts) accounts expected, got \(stdout)") }
        // A rekey while hosts run waits for their beat first: said apart.
        let object = (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any]
        return RegistryResult.Step(name: name, seconds: elapsed.seconds, peakKiB: peakKiB,
                                   waitedSeconds: object?["takeUpSeconds"] as? Double)
    }

    /// A new store key in `path` (private), as `openssl rand -hex 32` makes one.
    static func newKey(_ path: String) throws -> String {
        let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        guard FileManager.default.createFile(atPath: path, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw BenchError.storeFailed("cannot write \(path)")
        }
        return path
    }

    /// A host's state directory holding a copy of `key`: a rekey of the tenant replaces it.
    static func hostState(_ path: String, key: String) throws -> String {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.copyItem(atPath: key, toPath: path + "/store.key")
        return path
    }

    /// VmHWM of `pid` (its resident high-water mark), in KiB.
    static func peakKiB(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
}

struct RegistryResult: Codable, Sendable {
    struct Step: Codable, Sendable {
        var name: String
        var seconds: Double
        var peakKiB: Int
        var waitedSeconds: Double?
    }

    var accounts: Int
    var steps: [Step] = []
    var error: String?

    init(accounts: Int) { self.accounts = accounts }

    func lines() -> [String] {
        var lines = ["14. Moving the registry: \(accounts) app-password accounts, each step one `blueskyd store` command "
            + "(target: under \(Int(RegistryBench.targetSeconds)) s each)"]
        if let error { lines.append("   failed: \(error)") }
        for step in steps {
            let waited = step.waitedSeconds.map { " (of which \(format($0, 1)) s waiting for the host's beat)" } ?? ""
            lines.append("   \(step.name): \(format(step.seconds, 1)) s\(waited), peak RSS \(mebibytes(step.peakKiB))"
                + (step.seconds < RegistryBench.targetSeconds ? "" : "  (over the target)"))
        }
        return lines
    }
}
