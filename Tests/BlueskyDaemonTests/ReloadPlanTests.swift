import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("Configuration reload: what applies now, what needs a restart")
struct ReloadPlanTests {
    let environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"]

    @Test("run-time keys are applied, the others are named and keep their old values")
    func plan() throws {
        let running = DaemonConfiguration(environment: environment)
        var new = running
        try new.apply(toml: """
            log_level = "debug"
            refresh_ahead_seconds = 60
            retry_max_seconds = 30
            max_concurrent_refreshes = 2
            socket = "/elsewhere.sock"
            plc_url = "https://plc.example"
            """, file: "b.toml")
        let plan = running.reloadPlan(to: new)
        #expect(plan.applied == ["refresh_ahead_seconds", "retry_max_seconds", "max_concurrent_refreshes", "log_level"])
        #expect(plan.needsRestart == ["socket", "plc_url"])
        #expect(plan.effective.logLevel == .debug && plan.effective.maxConcurrentRefreshes == 2)
        #expect(plan.effective.refreshAhead == .seconds(60) && plan.effective.retryMax == .seconds(30))
        #expect(plan.effective.socketPath == running.socketPath, "the socket stays until a restart")
        #expect(plan.effective.plcURL == running.plcURL)
        // Reloading the same file again still says the socket waits for a restart.
        #expect(plan.effective.reloadPlan(to: new).needsRestart == ["socket", "plc_url"])
        #expect(plan.effective.reloadPlan(to: new).applied.isEmpty)
    }

    @Test("an unchanged configuration changes nothing")
    func unchanged() {
        let running = DaemonConfiguration(environment: environment)
        let plan = running.reloadPlan(to: running)
        #expect(plan.applied.isEmpty && plan.needsRestart.isEmpty && plan.effective == running)
    }

    @Test("log_target is a key like the others: checked, with its line")
    func logTarget() throws {
        var configuration = DaemonConfiguration(environment: environment)
        try configuration.apply(toml: "log_target = \"journal\"\n", file: "b.toml")
        #expect(configuration.logTarget == .journal)
        #expect {
            try configuration.apply(toml: "\nlog_target = \"syslog\"\n", file: "b.toml")
        } throws: { error in
            "\(error)" == "b.toml:2: log_target: expected one of auto, journal, console"
        }
    }

    @Test("the status line counts accounts, those needing a login, and says when the next refresh is")
    func statusLine() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(StatusSummary.describe(accounts: 0, needsLogin: 0, nextRefresh: nil, now: now)
                == "no accounts yet (add one with bskyctl login)")
        #expect(StatusSummary.describe(accounts: 3, needsLogin: 1, nextRefresh: now.addingTimeInterval(252), now: now)
                == "3 accounts, 1 needs login; next refresh in 4m 12s")
        #expect(StatusSummary.describe(accounts: 1, needsLogin: 1, nextRefresh: nil, now: now)
                == "1 account, 1 needs login; no refresh scheduled")
        #expect(StatusSummary.describe(accounts: 2, needsLogin: 0, nextRefresh: now.addingTimeInterval(7300), now: now)
                == "2 accounts; next refresh in 2h 1m")
    }
}
