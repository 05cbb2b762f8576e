import Foundation
import Logging
import Synchronization
import SystemdGlue
import WebBasics

/// Re-reads the configuration on SIGHUP and applies what can change while running.
///
/// A file that does not parse changes nothing: the daemon keeps its configuration and says why.
/// Keys that only a restart can apply (the socket, the state directory, ...) are named in the
/// log and in the status line until the daemon restarts.
final class ConfigurationReloader: Sendable {
    enum Outcome: Sendable {
        case reloaded(ReloadPlan)
        case refused(ConfigurationError)
    }

    typealias Reader = @Sendable () throws(ConfigurationError) -> DaemonConfiguration

    private struct State {
        var running: DaemonConfiguration
        var needsRestart: [String] = []
        var lastRefusal: String?
    }

    private let state: Mutex<State>
    private let read: Reader
    private let logLevel: LogLevelControl
    private let environment: SessionEnvironment
    private let scheduler: RefreshScheduler
    private let logger: Logger

    init(running: DaemonConfiguration, read: @escaping Reader, logLevel: LogLevelControl,
         environment: SessionEnvironment, scheduler: RefreshScheduler, logger: Logger) {
        self.state = Mutex(State(running: running))
        self.read = read
        self.logLevel = logLevel
        self.environment = environment
        self.scheduler = scheduler
        self.logger = logger
    }

    /// Reads the configuration again (same precedence as at start) and applies it.
    func reload() async -> Outcome {
        let new: DaemonConfiguration
        do {
            new = try read()
        } catch {
            state.withLock { $0.lastRefusal = error.description }
            logger.error("configuration reload refused; still running on the previous configuration",
                         metadata: ["error": "\(error)", "outcome": "refused"])
            return .refused(error)
        }
        let plan = state.withLock { $0.running.reloadPlan(to: new) }
        let running = plan.effective
        logLevel.level = running.logLevel
        environment.retime(running.lifecycleRules)
        await scheduler.setLimits(running.refreshLimits)
        environment.oauth.providers.replace(running.providers)
        if plan.applied.contains("refresh_ahead_seconds") {
            // Every account moves to its date under the new lead time, not only the accounts
            // refreshed from now on.
            for session in environment.registry.allSessions { await session.retime() }
        }
        state.withLock {
            $0.running = running
            $0.needsRestart = plan.needsRestart
            $0.lastRefusal = nil
        }
        var metadata: Logger.Metadata = [
            "applied": "\(plan.applied.isEmpty ? "nothing changed" : plan.applied.joined(separator: ", "))",
            "outcome": "reloaded",
        ]
        if !plan.needsRestart.isEmpty {
            metadata["needsRestart"] = "\(plan.needsRestart.joined(separator: ", "))"
            logger.warning("configuration reloaded; some changes need a restart", metadata: metadata)
        } else {
            logger.notice("configuration reloaded", metadata: metadata)
        }
        return .reloaded(plan)
    }

    /// What the status line should add: changes waiting for a restart, or the last refusal.
    var statusNote: String? {
        state.withLock { state in
            if let refusal = state.lastRefusal {
                return "reload refused (\(refusal)), running on the previous configuration"
            }
            if !state.needsRestart.isEmpty {
                return "restart to apply: \(state.needsRestart.joined(separator: ", "))"
            }
            return nil
        }
    }
}
