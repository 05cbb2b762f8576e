import Foundation

/// A throwaway PostgreSQL 15 server (Debian's `postgresql` package) for tests and the bench:
/// its own data directory, a loopback port and a Unix socket directory, removed by `destroy()`.
///
/// PostgreSQL refuses to run as root, so when we are root every server command runs as
/// nobody/nogroup (65534) through `setpriv`, and the directory tree is handed over to that user.
///
/// The postmaster runs as our child rather than daemonized by `pg_ctl start`: Foundation's
/// `Process` learns that a child exited when a socket it leaves open in the child closes, and the
/// daemon inherits that socket, so `waitUntilExit` on `pg_ctl start` never returns.
public final class PostgresServer: @unchecked Sendable {
    /// The certificate and key the server presents when TLS is on, both PEM.
    public struct TLSFiles: Sendable {
        public var certificatePEM, privateKeyPEM: String
        public init(certificatePEM: String, privateKeyPEM: String) {
            (self.certificatePEM, self.privateKeyPEM) = (certificatePEM, privateKeyPEM)
        }
    }

    /// How `stop` shuts the server down, as `pg_ctl stop -m` would.
    public enum StopMode: String, Sendable { case fast, immediate }

    /// A failed step; its description carries what a failing test needs to explain itself.
    public enum Failure: Error, CustomStringConvertible {
        /// A command exited non-zero: its stderr and the end of the server log.
        case command(String, status: Int32, stderr: String, logTail: String)
        /// A role or database name outside `[a-z_][a-z0-9_]*`: we never quote untrusted identifiers.
        case invalidName(String)
        /// The directory or the port could not be set up.
        case setup(String)

        public var description: String {
            switch self {
            case let .command(command, status, stderr, logTail):
                "PostgreSQL command failed (exit \(status)): \(command)\n\(stderr)\n--- server log (last 40 lines) ---\n\(logTail)"
            case let .invalidName(name): "invalid PostgreSQL name \(name.debugDescription) (only [a-z0-9_])"
            case let .setup(what): "PostgreSQL setup failed: \(what)"
            }
        }
    }

    public static let binDirectory = "/usr/lib/postgresql/15/bin"
    /// nobody/nogroup: whom the server runs as when we are root.
    static let serverID: UInt32 = 65534

    public let host = "127.0.0.1"
    public let adminUser = "blueskyd_admin"
    public let port: UInt16
    public let adminPassword: String
    public let directory: String
    public var logFile: String { directory + "/postgres.log" }
    public var dataDirectory: String { directory + "/data" }
    public var socketDirectory: String { directory + "/socket" }
    private let tls: Bool
    /// Server settings beyond the fixed ones, each passed as `-c name=value`.
    private let settings: [(name: String, value: String)]
    private let lock = NSLock()
    private var destroyed = false
    /// The running postmaster (setpriv execs it, so the pid is postgres's own).
    private var postmaster: Process?

    /// Creates a cluster in `directory` (a new 0700 directory under /tmp when nil; a given one
    /// must have parents the server user can traverse) and starts it on `port` (a free one when nil).
    /// `settings` go to the server as `-c name=value` (the bench loads pg_stat_statements).
    public static func start(in directory: String? = nil, port: UInt16? = nil,
                             password: String = PostgresServer.randomPassword(),
                             tls: TLSFiles? = nil, settings: [(name: String, value: String)] = []) throws -> PostgresServer {
        let dir = try directory ?? makeTemporaryDirectory()
        do { try initialize(dir, password: password, tls: tls) } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
        // A port picked free may be taken before postgres binds it: try another one then.
        for attempt in 1... {
            let server = PostgresServer(directory: dir, port: try port ?? freePort(), password: password, tls: tls != nil,
                                        settings: settings)
            do {
                try server.start()
                return server
            } catch {
                guard port == nil, attempt < 3 else { server.destroy(); throw error }
                server.lock.withLock { server.destroyed = true }  // keeps the cluster for the next try
            }
        }
        fatalError("unreachable")
    }

    /// Runs initdb into `<dir>/data` as the server user and adds the TLS files.
    private static func initialize(_ dir: String, password: String, tls: TLSFiles?) throws {
        try FileManager.default.createDirectory(atPath: dir + "/socket", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        // initdb reads the superuser password from a file so that it never shows in argv.
        let pwfile = dir + "/pwfile"
        try writePrivate(password + "\n", to: pwfile)
        defer { try? FileManager.default.removeItem(atPath: pwfile) }
        try handOver(dir)
        let initdb = [binDirectory + "/initdb", "-D", dir + "/data", "--auth=scram-sha-256", "--auth-local=trust",
                      "--username=blueskyd_admin", "--pwfile=" + pwfile, "-E", "UTF8", "--locale=C.UTF-8"]
        let result = try run(initdb, in: dir)
        guard result.status == 0 else {
            throw Failure.command(initdb.joined(separator: " "), status: result.status, stderr: result.stderr, logTail: "")
        }
        if let tls {
            try writePrivate(tls.certificatePEM, to: dir + "/data/server.crt")
            try writePrivate(tls.privateKeyPEM, to: dir + "/data/server.key")
            // As a deployment should: TCP clients over TLS only (`hostssl`), local ones trusted.
            try writePrivate("local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
                                + "hostssl all all ::1/128 scram-sha-256\n", to: dir + "/data/pg_hba.conf")
            try handOver(dir + "/data")
        }
    }

    private init(directory: String, port: UInt16, password: String, tls: Bool, settings: [(name: String, value: String)]) {
        (self.directory, self.port, self.adminPassword, self.tls, self.settings) = (directory, port, password, tls, settings)
    }

    deinit { destroy() }

    /// The server log so far.
    public var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// `postgresql://user@127.0.0.1:PORT/database` (no password: pass it separately).
    public func url(user: String, database: String) -> String { "postgresql://\(user)@\(host):\(port)/\(database)" }

    /// Whether the postmaster we started is still running.
    public var isRunning: Bool { lock.withLock { postmaster.map { Self.exitStatus($0) == nil } ?? false } }

    /// The postmaster's pid while it runs: its children are the server's backends.
    public var pid: Int32? { lock.withLock { postmaster.map(\.processIdentifier) } }

    /// Starts the server on its data directory and port; returns once it accepts connections.
    public func start() throws {
        try lock.withLock {
            if let postmaster, Self.exitStatus(postmaster) == nil { return }
            var command = [Self.binDirectory + "/postgres", "-D", dataDirectory, "-p", String(port),
                           "-k", socketDirectory, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on",
                           "-c", "synchronous_commit=on", "-c", "max_connections=200"]
            if tls {
                command += ["-c", "ssl=on", "-c", "ssl_cert_file=\(dataDirectory)/server.crt",
                            "-c", "ssl_key_file=\(dataDirectory)/server.key"]
            }
            command += settings.flatMap { ["-c", "\($0.name)=\($0.value)"] }
            let process = Self.makeProcess(command, in: directory)
            let fd = open(logFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Failure.setup("open \(logFile): errno \(errno)") }
            let log = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            (process.standardInput, process.standardOutput, process.standardError) = (FileHandle.nullDevice, log, log)
            try process.run()
            postmaster = process
            // Ready when postmaster.pid names our process and says "ready" (what `pg_ctl -w` waits for).
            let deadline = Date().addingTimeInterval(60)
            while Self.exitStatus(process) == nil, Date() < deadline {
                let lines = ((try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)) ?? "")
                    .split(separator: "\n", omittingEmptySubsequences: false)
                if lines.count >= 8, lines[0] == String(process.processIdentifier),
                   lines[7].trimmingCharacters(in: .whitespaces) == "ready" { return }
                usleep(20_000)
            }
            kill(process.processIdentifier, SIGKILL)
            let status = Self.waitForExit(process)
            postmaster = nil
            throw Failure.command(command.joined(separator: " "), status: status,
                                  stderr: Date() < deadline ? "postgres exited" : "not ready after 60 s", logTail: logTail())
        }
    }

    /// Stops the server: `.fast` rolls back sessions and checkpoints, `.immediate` is a crash.
    /// Sends the postmaster the signal `pg_ctl stop -m` would (SIGINT, SIGQUIT) and waits for it.
    public func stop(mode: StopMode = .fast) throws {
        try lock.withLock {
            guard let process = postmaster else { return }
            if Self.exitStatus(process) == nil { kill(process.processIdentifier, mode == .fast ? SIGINT : SIGQUIT) }
            let status = Self.waitForExit(process)
            postmaster = nil
            guard status == 0 || mode == .immediate else {
                throw Failure.command("postgres (stop -m \(mode))", status: status, stderr: "", logTail: logTail())
            }
        }
    }

    /// Stops (fast) and starts again on the same data directory and port.
    public func restart() throws { try stop(); try start() }

    /// Creates a login role `owner` with `password` and a database `name` it owns.
    public func createDatabase(_ name: String, owner: String, password: String) throws {
        try Self.checkName(name)
        try Self.checkName(owner)
        let literal = "'" + password.replacingOccurrences(of: "'", with: "''") + "'"
        // Separate statements (not one -c string): CREATE DATABASE cannot run inside a transaction.
        // The SET keeps a failing statement, password and all, out of the log that errors quote.
        try psql("""
            SET log_min_error_statement = panic;
            CREATE ROLE \(owner) LOGIN PASSWORD \(literal);
            CREATE DATABASE \(name) OWNER \(owner);
            """, database: "postgres")
    }

    /// Runs `sql` as the admin over the Unix socket, unaligned and tuples only; returns stdout trimmed.
    @discardableResult
    /// - Parameter user: the role to run it as (local connections are trusted); the admin by default.
    public func psql(_ sql: String, database: String, user: String? = nil) throws -> String {
        // The SQL goes in on stdin so that passwords in it never show in argv.
        let command = ["/usr/bin/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory,
                       "-p", String(port), "-U", user ?? adminUser, "-d", database, "-f", "-"]
        let result = try Self.run(command, in: directory, input: sql)
        guard result.status == 0 else {
            throw Failure.command(command.joined(separator: " "), status: result.status, stderr: result.stderr,
                                  logTail: logTail())
        }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server (immediate) if it runs and removes its directory; idempotent.
    public func destroy() {
        guard lock.withLock({ () -> Bool in defer { destroyed = true }; return !destroyed }) else { return }
        try? stop(mode: .immediate)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A random alphanumeric password (SystemRandomNumberGenerator reads getrandom).
    public static func randomPassword() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<32).map { _ in alphabet.randomElement()! })
    }

    private func logTail() -> String { log.split(separator: "\n", omittingEmptySubsequences: false).suffix(40).joined(separator: "\n") }

    private static func checkName(_ name: String) throws {
        let valid = !name.isEmpty && name.count <= 63 && name.first.map { !$0.isNumber } == true
            && name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        guard valid else { throw Failure.invalidName(name) }
    }

    /// Runs a command (as the server user when we are root) and waits for it. Output goes to
    /// unlinked scratch files, not pipes: nothing can fill a pipe nobody reads, or keep one open.
    private static func run(_ command: [String], in directory: String, input: String? = nil)
        throws -> (status: Int32, stdout: String, stderr: String) {
        let process = makeProcess(command, in: directory)
        let stdout = try scratchFile(), stderr = try scratchFile(), stdin = try scratchFile()
        stdin.write(Data((input ?? "").utf8))
        try stdin.seek(toOffset: 0)
        (process.standardInput, process.standardOutput, process.standardError) = (stdin, stdout, stderr)
        try process.run()
        let status = waitForExit(process)
        func read(_ handle: FileHandle) throws -> String {
            try handle.seek(toOffset: 0)
            return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        }
        return (status, try read(stdout), try read(stderr))
    }

    /// The exit status of `process` (128 + signal if killed), nil while it runs. Not from
    /// `Process.isRunning` alone: Foundation sees an exit only once a socket it leaves in the child
    /// closes, and any process spawned at that moment (a postmaster, a daemon) inherits it too.
    /// `waitid(WNOWAIT)` looks at the zombie without reaping it, which stays Foundation's job.
    private static func exitStatus(_ process: Process) -> Int32? {
        if !process.isRunning {
            return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        }
        var info = siginfo_t()
        guard waitid(P_PID, id_t(process.processIdentifier), &info, WEXITED | WNOHANG | WNOWAIT) == 0,
              info._sifields._sigchld.si_pid == process.processIdentifier else { return nil }
        let status = info._sifields._sigchld.si_status
        return info.si_code == Int32(CLD_EXITED) ? status : 128 + status
    }

    /// Waits for `process` to end; one still running after `limit` (a hung server, a psql
    /// that never returns) is killed, so that no test hangs on it.
    private static func waitForExit(_ process: Process, limit: TimeInterval = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(limit)
        var killed = false
        while true {
            if let status = exitStatus(process) { return status }
            if !killed, Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                killed = true
            }
            usleep(5_000)
        }
    }

    /// `command` as the server user when we are root, with a clean environment.
    private static func makeProcess(_ command: [String], in directory: String) -> Process {
        let process = Process()
        let prefix = geteuid() == 0 ? ["/usr/bin/setpriv", "--reuid=\(serverID)", "--regid=\(serverID)", "--clear-groups", "--"] : []
        process.executableURL = URL(fileURLWithPath: (prefix + command)[0])
        process.arguments = Array((prefix + command).dropFirst())
        // Inherited PG* variables (PGHOST, PGPASSWORD...) would redirect psql; nobody's HOME does not exist.
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") }
            .merging(["HOME": directory, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"]) { $1 }
        // Our own cwd may be a 0700 directory the server user cannot enter.
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        return process
    }

    /// An unlinked temporary file, close-on-exec: other threads' children (a postmaster) need not hold it.
    private static func scratchFile() throws -> FileHandle {
        var template = Array("/tmp/blueskyd-pg-io-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw Failure.setup("mkstemp: errno \(errno)") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Under /tmp rather than $TMPDIR: every parent must be traversable by the server user.
    private static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/blueskyd-pg-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure.setup("mkdtemp: errno \(errno)")
        }
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    private static func writePrivate(_ contents: String, to path: String) throws {
        let data = Data(contents.utf8)
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw Failure.setup("cannot write \(path)") }
    }

    /// When root, gives `path` and everything under it to the server user.
    private static func handOver(_ path: String) throws {
        guard geteuid() == 0 else { return }
        let below = FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []
        for p in [path] + below.map({ path + "/" + $0 }) where chown(p, serverID, serverID) != 0 {
            throw Failure.setup("chown \(p): errno \(errno)")
        }
    }

    /// A port free on 127.0.0.1 right now: bind port 0, read what the kernel gave, close.
    private static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0,
                                  sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                fd >= 0 && bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw Failure.setup("bind 127.0.0.1:0: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }
}
