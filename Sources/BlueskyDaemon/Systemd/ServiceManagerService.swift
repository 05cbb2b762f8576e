import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import SystemdGlue
import UnixSignals

/// blueskyd's side of the conversation with systemd: READY=1 once the socket listens, STATUS=
/// lines, WATCHDOG=1 after each passed liveness check, RELOADING=1 … READY=1 around a SIGHUP
/// reload, STOPPING=1 when the graceful stop begins.
///
/// It must be the last service of the group: the group stops services in reverse order, so
/// STOPPING=1 goes out before the socket drains and the scheduler lets its refreshes finish.
struct ServiceManagerService: Service {
    let notifier: SystemdNotifier
    let server: RPCServer
    let liveness: Liveness
    let summary: StatusSummary
    let reloader: ConfigurationReloader
    let watchdogTimeout: Duration?
    let logger: Logger
    /// How often the status line is looked at: it reads counts kept as accounts change (no
    /// work per account), and is sent only when it changed.
    var statusInterval: Duration = .seconds(5)

    func run() async throws {
        // Trap SIGHUP before READY=1: its default action would kill the daemon.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        try await server.waitUntilListening()
        notifier.ready(status: await summary.line())
        logger.debug("told the service manager we are ready", metadata: ["notify": "\(notifier.isEnabled)"])
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown {
                await withDiscardingTaskGroup { group in
                    group.addTask { await keepWatchdogFed() }
                    group.addTask { await refreshStatus() }
                    group.addTask {
                        for await _ in hangups { await reload() }
                    }
                }
            }
        } onGracefulShutdown: {
            notifier.stopping(status: "stopping: letting refreshes and calls in progress finish")
        }
    }

    private func reload() async {
        notifier.reloading()
        logger.info("SIGHUP: reloading the configuration")
        _ = await reloader.reload()
        notifier.ready(status: await summary.line())
    }

    /// Pings at half the watchdog timeout, as sd_watchdog_enabled(3) advises, and only after a
    /// liveness check passed within a quarter of it.
    private func keepWatchdogFed() async {
        guard let timeout = watchdogTimeout else { return }
        let interval = timeout / 2
        logger.debug("watchdog enabled", metadata: ["timeoutSeconds": "\(timeout)"])
        let clock = ContinuousClock()
        var next = clock.now
        while !Task.isCancelled {
            let unresponsive = await liveness.unresponsiveParts(within: timeout / 4)
            if unresponsive.isEmpty {
                notifier.watchdog()
            } else {
                logger.critical("liveness check failed; withholding the watchdog keep-alive",
                                metadata: ["unresponsive": "\(unresponsive.joined(separator: ", "))"])
            }
            // A fixed cadence, whatever the check took: pings never drift apart.
            next += interval
            guard (try? await Task.sleep(until: max(next, clock.now), clock: clock)) != nil else { return }
        }
    }

    private func refreshStatus() async {
        // Nobody reads the line outside systemd.
        guard notifier.isEnabled else { return }
        var last = ""
        while (try? await Task.sleep(for: statusInterval)) != nil {
            let line = await summary.line()
            if line != last { notifier.status(line) }
            last = line
        }
    }
}
