import AccountStoreCore
import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import WebBasics
import XRPCGateway

/// Runs the refresh schedule until the stop.
struct SchedulerService: Service {
    let scheduler: RefreshScheduler
    let accounts: AccountManager

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await scheduler.run { id, call in await accounts.upkeep(id, call) }
        }
    }
}

/// With a shared store: takes this host's share of the due accounts, and writes the dates
/// this host decides.
struct SharedScheduleService: Service {
    let schedule: any SharedRefreshSchedule
    let dates: SharedDueWriter
    let scheduler: RefreshScheduler
    let accounts: AccountManager
    let logger: Logger

    func run() async throws {
        let accounts = accounts
        let taker = SharedScheduleTaker(schedule: schedule, scheduler: scheduler, adopt: { await accounts.adoptTaken($0) },
                                        logger: logger, now: { Date() })
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await repairDueDates() }
                group.addTask { await dates.run(schedule: schedule, logger: logger) }
                await taker.run()
                dates.stop()
            }
        }
    }

    /// A date lost in a race (a late "never" over a new login's) must not leave an account
    /// unscheduled for good: every active account without a due date gets one, as soon as the
    /// store lets it (tried again with backoff while it does not).
    private func repairDueDates() async {
        var attempt = 0
        while !Task.isCancelled {
            do {
                let repaired = try await schedule.repairMissingDueDates(at: Date())
                if repaired > 0 { logger.notice("gave accounts without a due date one", metadata: ["accounts": "\(repaired)"]) }
                return
            } catch {
                attempt += 1
                if attempt == 1 { logger.warning("cannot check the due dates yet; trying again", metadata: ["error": "\(error)"]) }
                try? await Task.sleep(for: .seconds(Backoff.storeRetry.delay(attempt: attempt)))
            }
        }
    }
}

/// Serves the JSON-RPC socket; on shutdown stops accepting and lets calls in progress finish.
struct SocketService: Service {
    let server: RPCServer
    let onShutdown: @Sendable () -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await cancelWhenGracefulShutdown { try await server.run() }
        } onGracefulShutdown: {
            onShutdown()
        }
    }
}

/// Serves the XRPC gateway; stops accepting with the JSON-RPC socket and lets calls in
/// progress finish.
struct GatewayService: Service {
    let server: GatewayServer

    func run() async throws {
        try await cancelWhenGracefulShutdown { try await server.run() }
    }
}
