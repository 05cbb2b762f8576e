import DaemonHarness
import Foundation

/// What the database did over a stretch of the cluster's work, read from its own statistics:
/// - statements clients sent (`pg_stat_statements`, top level only, BEGIN and COMMIT
///   included): each is one round trip, since postgres-nio sends one statement at a time;
///   with the time the server spent executing each;
/// - calls of PL/pgSQL functions (`pg_stat_user_functions`): the triggers those statements fired;
/// - WAL flushes (`pg_stat_wal`'s `wal_sync`): the disk waits durable commits cost, and WAL bytes;
/// - rows written and sessions opened (`pg_stat_database`: a new connection costs the server a
///   process and a SCRAM exchange), and the CPU time of the server's processes.
/// Two readings' difference is the stretch's cost.
struct DatabaseReading: Sendable {
    var statements: [String: StatementCounts]
    var functionCalls: Int
    var walSyncs: Int
    var walBytes: Int
    var rowsWritten: Int
    var sessions: Int
    var cpuSeconds: Double

    struct StatementCounts: Sendable {
        var calls = 0
        var milliseconds = 0.0
    }

    /// The server settings that make statements countable.
    static let serverSettings: [(name: String, value: String)] = [
        ("shared_preload_libraries", "pg_stat_statements,auto_explain"), ("pg_stat_statements.track", "top"),
        ("pg_stat_statements.max", "1000"), ("track_functions", "pl"),
        // Plans of statements slower than 50 ms go to the server's log.
        ("auto_explain.log_min_duration", "50"),
    ]

    /// Installs the statement counter in `database` (once, as the admin).
    static func prepare(_ server: PostgresServer, database: String) throws {
        try server.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements;", database: database)
    }

    static func read(_ server: PostgresServer, database: String) throws -> DatabaseReading {
        // One line per statement: calls, time, and the text on one line (normalised by the counter).
        let lines = try server.psql("""
            SELECT calls || E'\\t' || total_exec_time || E'\\t' || regexp_replace(query, '\\s+', ' ', 'g')
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '\(database)');
            """, database: database)
        var statements: [String: StatementCounts] = [:]
        for line in lines.split(separator: "\n") {
            let fields = line.split(separator: "\t", maxSplits: 2)
            guard fields.count == 3, let calls = Int(fields[0]), let milliseconds = Double(fields[1]) else { continue }
            statements[String(fields[2]), default: StatementCounts()].calls += calls
            statements[String(fields[2]), default: StatementCounts()].milliseconds += milliseconds
        }
        let totals = try server.psql("""
            SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions) || ' ' || wal_sync || ' ' || wal_bytes
                || ' ' || (SELECT (tup_inserted + tup_updated + tup_deleted) || ' ' || sessions FROM pg_stat_database
                           WHERE datname = '\(database)')
            FROM pg_stat_wal;
            """, database: database).split(separator: " ").map { Int(Double($0) ?? 0) }
        guard totals.count == 5 else { throw BenchError.unexpectedReply("the database's statistics: \(totals)") }
        return DatabaseReading(statements: statements, functionCalls: totals[0], walSyncs: totals[1], walBytes: totals[2],
                               rowsWritten: totals[3], sessions: totals[4], cpuSeconds: server.pid.map(Self.treeCPU) ?? 0)
    }

    /// CPU time of the postmaster, its live children, and its children that have exited.
    private static func treeCPU(_ postmaster: Int32) -> Double {
        var seconds = ProcessCPU.read(pid: postmaster).map { $0.seconds + $0.childrenSeconds } ?? 0
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry), ProcessCPU.parent(of: pid) == postmaster else { continue }
            seconds += ProcessCPU.read(pid: pid)?.seconds ?? 0
        }
        return seconds
    }
}

/// One stretch's cost per refresh: what `DatabaseReading`s before and after it differ by,
/// divided by the refreshes made meanwhile.
struct DatabaseCost: Codable, Sendable {
    var refreshes: Int
    /// Statements clients sent: round trips.
    var statementsPerRefresh: Double
    var triggerCallsPerRefresh: Double
    var walSyncsPerRefresh: Double
    var walBytesPerRefresh: Double
    var rowsWrittenPerRefresh: Double
    /// Connections the hosts opened during the stretch (not per refresh).
    var sessionsOpened: Int
    var databaseCPUMicrosecondsPerRefresh: Double
    var hostsCPUMicrosecondsPerRefresh: Double
    /// Every statement run at least once per 100 refreshes, most run first.
    var statements: [Statement]

    struct Statement: Codable, Sendable {
        var callsPerRefresh: Double
        /// Time the server spent executing it, per refresh.
        var microsecondsPerRefresh: Double
        var text: String
    }

    init(from before: DatabaseReading, to after: DatabaseReading, hostsCPUSeconds: Double, refreshes: Int) {
        let per = 1 / Double(max(1, refreshes))
        var statements: [Statement] = []
        for (text, counts) in after.statements {
            let calls = counts.calls - (before.statements[text]?.calls ?? 0)
            let milliseconds = counts.milliseconds - (before.statements[text]?.milliseconds ?? 0)
            if calls > 0 { statements.append(Statement(callsPerRefresh: Double(calls) * per,
                                                       microsecondsPerRefresh: milliseconds * 1000 * per, text: text)) }
        }
        statements.sort { $0.callsPerRefresh > $1.callsPerRefresh }
        self.refreshes = refreshes
        statementsPerRefresh = statements.reduce(0) { $0 + $1.callsPerRefresh }
        triggerCallsPerRefresh = Double(after.functionCalls - before.functionCalls) * per
        walSyncsPerRefresh = Double(after.walSyncs - before.walSyncs) * per
        walBytesPerRefresh = Double(after.walBytes - before.walBytes) * per
        rowsWrittenPerRefresh = Double(after.rowsWritten - before.rowsWritten) * per
        sessionsOpened = after.sessions - before.sessions
        databaseCPUMicrosecondsPerRefresh = (after.cpuSeconds - before.cpuSeconds) * 1e6 * per
        hostsCPUMicrosecondsPerRefresh = hostsCPUSeconds * 1e6 * per
        self.statements = statements.filter { $0.callsPerRefresh >= 0.01 }
    }

    func lines() -> [String] {
        var lines = ["   the storm's cost per refresh: \(format(statementsPerRefresh, 2)) statements (round trips), "
            + "\(format(walSyncsPerRefresh, 2)) WAL flushes, \(format(walBytesPerRefresh, 0)) WAL bytes, "
            + "\(format(rowsWrittenPerRefresh, 2)) rows written, \(format(triggerCallsPerRefresh, 2)) trigger calls, "
            + "\(sessionsOpened) connections opened in all; CPU "
            + "\(format(databaseCPUMicrosecondsPerRefresh, 0)) µs in PostgreSQL, \(format(hostsCPUMicrosecondsPerRefresh, 0)) µs in the hosts"]
        for statement in statements {
            lines.append("     \(format(statement.callsPerRefresh, 2)) × \(format(statement.microsecondsPerRefresh, 0)) µs: "
                + Self.abridged(statement.text))
        }
        return lines
    }

    /// A statement's start and end, which tell it apart, within a line.
    static func abridged(_ text: String) -> String {
        text.count <= 150 ? text : text.prefix(90) + " … " + text.suffix(55)
    }
}
