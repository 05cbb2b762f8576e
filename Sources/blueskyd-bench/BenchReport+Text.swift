import Foundation

/// The human-readable report.
extension BenchReport {
    func text() -> String {
        var lines: [String] = []
        lines.append("blueskyd benchmark — \(machine.date)")
        lines.append("machine:  \(machine.processors) CPUs, \(machine.cpuModel), \(machine.memoryTotal) RAM, Linux \(machine.kernel)")
        lines.append("upstream: \(upstream)")
        lines.append("daemon:   \(daemonBinary)")
        if wants("throughput") {
            lines.append("")
            lines += throughputLines(throughput, title: "1. Throughput")
        }
        if wants("latency") {
            lines.append("")
            lines += latencyLines(latency, title: "2. Latency at one connection")
        }
        if wants(GatewayUpload.section) {
            lines.append("")
            if let u = gatewayUpload {
                lines.append("11. A \(u.bytes / 1_000_000) MB blob uploaded through the XRPC gateway (64 KiB chunks; the daemon's peak reset before)")
                lines.append("   \(format(u.seconds, 2)) s (\(format(Double(u.bytes) / u.seconds / 1_048_576, 0)) MiB/s), status \(u.status); daemon RSS before "
                    + "\(mebibytes(u.rssBeforeKiB)), peak during \(mebibytes(u.peakDuringKiB)): growth \(mebibytes(u.growthKiB))   "
                    + "target ≤ 16 MiB   " + verdict(u.meetsTarget))
            } else {
                lines.append("11. Upload through the XRPC gateway: not measured (see problems)")
            }
        }
        if wants("memory") {
            lines.append("")
            lines += memoryLines()
        }
        if let dpop {
            lines.append("")
            lines += dpopLines(dpop)
        }
        if oauthThroughput != nil || oauthLatency != nil || !nonceChallenges.isEmpty {
            lines.append("")
            lines += throughputLines(oauthThroughput, title: "5. OAuth throughput (DPoP-bound, a fresh proof per call)")
            lines.append("")
            lines += latencyLines(oauthLatency, title: "6. OAuth latency at one connection")
            lines.append("")
            lines += nonceLines()
        }
        if oauth2Throughput != nil || oauth2Latency != nil {
            lines.append("")
            lines += throughputLines(oauth2Throughput, title: "12. OAuth 2.0 account throughput (the testbed's Mastodon instance, bearer token; http.call, then /http/)",
                                     server: "Mastodon")
            lines.append("")
            lines += latencyLines(oauth2Latency, title: "13. OAuth 2.0 account latency at one connection")
        }
        if let events {
            lines.append("")
            lines += events.lines()
        }
        if let refreshCapacity {
            lines.append("")
            lines += refreshCapacity.lines()
        }
        if let cluster {
            lines.append("")
            lines += cluster.lines()
        }
        if let registry {
            lines.append("")
            lines += registry.lines()
        }
        if let oneShot {
            lines.append("")
            lines.append("16. One call from a program started for it (\(oneShot.runs) starts each, taking turns; wall time, ms)")
            lines.append("   bskyctl proxy p50 \(format(oneShot.bskyctlMedian, 1)), the Python atproto SDK through the gateway p50 "
                + "\(format(oneShot.sdkMedian, 1)): \(format(oneShot.ratio, 1)) times faster   target ≥ \(format(OneShotBench.targetRatio, 0))   "
                + verdict(oneShot.meetsTarget))
        }
        if !footprint.isEmpty {
            lines.append("")
            lines.append("15. Footprint: the binaries as built (release, Swift runtime linked in) and stripped (as installed)")
            for binary in footprint {
                lines.append("   " + binary.name.padding(toLength: 10, withPad: " ", startingAt: 0)
                    + "built \(megabytes(binary.builtBytes)), stripped \(megabytes(binary.strippedBytes))   "
                    + "target ≤ \(megabytes(binary.targetBytes))   " + verdict(binary.meetsTarget))
            }
        }
        if !problems.isEmpty {
            lines.append("")
            lines.append("Problems:")
            lines += problems.map { "  - \($0)" }
        }
        return lines.joined(separator: "\n")
    }

    /// Whether a section was asked for (a report from before `sections` was recorded: all).
    private func wants(_ section: String) -> Bool { sections.isEmpty || sections.contains(section) }

    /// `server`: what the direct side calls, padded to the column ("the PDS").
    private func throughputLines(_ result: ThroughputResult?, title: String, server: String = "the PDS") -> [String] {
        let directLabel = "   direct (HTTPS to \(server)):".padding(toLength: 31, withPad: " ", startingAt: 0)
        guard let t = result else { return ["\(title): not measured (see problems)"] }
        var lines = [
            "\(title): \(t.nsid), \(t.connections) connections, \(t.inFlightPerConnection) request in flight each,"
                + " \(t.directRounds.count) rounds × \(format(t.roundSeconds, 1)) s per side, alternating",
            directLabel + "median \(format(t.directMedian, 0)) calls/s   rounds: "
                + t.directRounds.map { format($0, 0) }.joined(separator: ", "),
            "   through blueskyd:           median \(format(t.daemonMedian, 0)) calls/s   rounds: "
                + t.daemonRounds.map { format($0, 0) }.joined(separator: ", "),
            "   ratio daemon/direct: \(format(t.ratio, 2))   target ≥ \(format(ThroughputResult.targetRatio, 2))   "
                + verdict(t.meetsTarget),
        ]
        if let g = t.gateway {
            lines.append("   then direct and the XRPC gateway, taking turns the same way:")
            lines.append(directLabel + "median \(format(Statistics.median(g.directRounds) ?? 0, 0)) calls/s   rounds: "
                + g.directRounds.map { format($0, 0) }.joined(separator: ", "))
            lines.append("   through the XRPC gateway:   median \(format(g.median, 0)) calls/s   rounds: "
                + g.rounds.map { format($0, 0) }.joined(separator: ", "))
            lines.append("   ratio gateway/direct: \(format(g.ratio, 2))   target ≥ \(format(ThroughputResult.targetRatio, 2))   "
                + verdict(g.meetsTarget) + (g.failures > 0 ? "   failed calls: \(g.failures)" : ""))
        }
        if t.directFailures + t.daemonFailures > 0 {
            lines.append("   failed calls: direct \(t.directFailures), daemon \(t.daemonFailures)"
                + (t.firstError.map { " (first: \($0))" } ?? ""))
        }
        if let rss = t.daemonRSSAfterLoadKiB { lines.append("   daemon RSS after the load: \(mebibytes(rss))") }
        return lines
    }

    private func latencyLines(_ result: LatencyResult?, title: String) -> [String] {
        guard let l = result else { return ["\(title): not measured (see problems)"] }
        var lines = [
            "\(title): \(l.nsid), sequential, \(l.samplesPerSide) samples per side"
                + " in alternating blocks of \(l.blockSize) (µs)",
            "                    p50       p90       p99      mean",
            "   direct     " + row(l.direct),
            "   blueskyd   " + row(l.daemon),
            "   added p50: \(format(l.addedP50, 1)) µs   target ≤ \(format(l.targetAddedP50, 0)) µs   "
                + verdict(l.meetsTarget) + "   (added p99: \(format(l.addedP99, 1)) µs)",
        ]
        if let gateway = l.gateway, let direct = l.gatewayDirect, let added = l.gatewayAddedP50, let met = l.gatewayMeetsTarget {
            lines += [
                "   then direct and the XRPC gateway, taking turns the same way:",
                "   direct     " + row(direct),
                "   gateway    " + row(gateway),
                "   gateway added p50: \(format(added, 1)) µs   target ≤ \(format(l.targetAddedP50, 0)) µs   "
                    + verdict(met) + "   (added p99: \(format(l.gatewayAddedP99 ?? 0, 1)) µs)",
            ]
        }
        if let cost = l.cost { lines += costLines(cost) }
        if l.failures > 0 { lines.append("   calls without status 200: \(l.failures)") }
        return lines
    }

    /// CPU and context switches per call, counted by the kernel over a fixed number of calls.
    private func costLines(_ cost: CallCosts) -> [String] {
        var lines = [
            "   per call over \(cost.direct.calls) sequential calls (CPU µs; voluntary/involuntary switches):",
            "              blueskyd CPU  switches    client CPU  switches   blueskyd / direct client CPU",
        ]
        func line(_ name: String, _ c: CallCost, ratio: Bool) -> String {
            "   " + name.padding(toLength: 10, withPad: " ", startingAt: 0)
                + pad(format(c.daemonCPU, 1), 12) + pad(format(c.daemonVoluntarySwitches, 2) + "/" + format(c.daemonInvoluntarySwitches, 2), 12)
                + pad(format(c.clientCPU, 1), 12) + pad(format(c.clientVoluntarySwitches, 2) + "/" + format(c.clientInvoluntarySwitches, 2), 12)
                + (ratio && cost.direct.clientCPU > 0 ? pad(format(c.daemonCPU / cost.direct.clientCPU, 2), 12) : "")
        }
        lines.append(line("direct", cost.direct, ratio: false))
        lines.append(line("json-rpc", cost.daemon, ratio: true))
        if let gateway = cost.gateway { lines.append(line("gateway", gateway, ratio: true)) }
        return lines
    }

    private func nonceLines() -> [String] {
        guard !nonceChallenges.isEmpty else { return ["7. DPoP nonce challenges: not measured (see problems)"] }
        var lines = ["7. DPoP nonce challenges from the PDS over proxied OAuth calls"
            + " (\(nonceChallenges[0].connections) connections, one request in flight each)",
                     "   rotation   calls    wall time   rotations   challenges   per 10,000   first call"]
        for n in nonceChallenges {
            lines.append("   " + pad("\(n.rotationSeconds) s", 8) + "  " + pad(String(n.calls), 7)
                + "  " + pad(format(n.wallSeconds, 2) + " s", 10) + "  " + pad(String(n.rotationsDuringRun), 10)
                + "  " + pad(String(n.during.pdsNonceChallenges), 11) + "  " + pad(format(n.challengesPer10000Calls, 1), 11)
                + "  " + pad(n.firstCallChallenges.map(String.init) ?? "?", 10))
        }
        for n in nonceChallenges {
            var notes: [String] = []
            if n.failed > 0 { notes.append("\(n.failed) failed calls" + (n.firstError.map { " (first: \($0))" } ?? "")) }
            if n.during.authenticatedResourceCalls != n.calls - n.failed {
                notes.append("\(n.during.authenticatedResourceCalls) calls authenticated at the PDS")
            }
            let refused = n.during.invalidTokenRejections + n.during.dpopRejections
            if refused > 0 { notes.append("\(refused) refused proofs or tokens") }
            if n.during.refreshes > 0 { notes.append("\(n.during.refreshes) refreshes") }
            if let idle = n.idleSeconds, let challenges = n.afterIdleChallenges {
                notes.append("then \(format(idle, 1)) s without a call and one more call: \(challenges) challenge\(challenges == 1 ? "" : "s")")
            }
            lines.append("   \(n.rotationSeconds) s: \(n.setup)" + (notes.isEmpty ? "" : "; " + notes.joined(separator: ", ")))
        }
        return lines
    }

    private func dpopLines(_ d: DPoPResult) -> [String] {
        [
            "4. DPoP proof vs the raw P-256 signature in it (\(d.proofBytes)-byte proof with ath and nonce;"
                + " \(d.rounds) alternating batches of \(d.batch))",
            "   proof: \(format(d.proofMicroseconds, 1)) µs   raw signature: \(format(d.signatureMicroseconds, 1)) µs"
                + "   ratio \(format(d.ratio, 2))   target ≤ \(format(DPoPResult.targetRatio, 1))   " + verdict(d.meetsTarget),
        ]
    }

    private func memoryLines() -> [String] {
        guard !memory.isEmpty else { return ["3. Idle memory: not measured (see problems)"] }
        var lines = ["3. Idle memory of blueskyd (VmRSS after daemon.status and a settle; medians of the starts)",
                     "   accounts     RSS        peak       start      start CPU  store seeding   RSS of each start"]
        for m in memory {
            if let error = m.error, m.rssKiB == nil {
                lines.append("   \(pad(String(m.accounts), 10))   failed: \(error)")
                continue
            }
            lines.append(memoryRow(String(m.accounts), m.side, seeding: m.seedSeconds.map { format($0, 1) + " s" } ?? "?")
                + (m.accountsLoaded.map { $0 == m.accounts ? "" : "   (daemon.status reports \($0) accounts)" } ?? ""))
            if let b = m.baseline { lines.append(memoryRow("baseline", b, seeding: "")) }
        }
        if let thousand = memory.first(where: { $0.accounts == 1000 }), let rss = thousand.rssKiB {
            lines.append("   at 1,000 accounts: \(mebibytes(rss))   target < 40 MB   "
                + verdict(rss < MemoryResult.targetKiBAtThousand))
        }
        if let large = memory.first(where: { $0.accounts == 100_000 }), let rss = large.rssKiB,
           let seconds = large.startSeconds {
            lines.append("   at 100,000 accounts: \(mebibytes(rss)), start \(format(seconds, 2)) s   target ≤ 80 MiB, ≤ 0.5 s   "
                + verdict(rss <= MemoryResult.targetKiBAtHundredThousand && seconds <= MemoryResult.targetStartAtHundredThousand))
        }
        if let huge = memory.first(where: { $0.accounts == 1_000_000 }), let rss = huge.rssKiB,
           let seconds = huge.startSeconds {
            lines.append("   at 1,000,000 accounts: \(mebibytes(rss)), start \(format(seconds, 2)) s   target ≤ 512 MiB, ≤ 5 s   "
                + verdict(rss <= MemoryResult.targetKiBAtMillion && seconds <= MemoryResult.targetStartAtMillion))
        }
        return lines
    }

    /// One build's line of the memory section.
    private func memoryRow(_ label: String, _ side: MemorySide, seeding: String) -> String {
        "   " + pad(label, 10)
            + "   " + pad(side.rssKiB.map(mebibytes) ?? "?", 9)
            + "  " + pad(side.peakKiB.map(mebibytes) ?? "?", 9)
            + "  " + pad(side.startSeconds.map { format($0, 2) + " s" } ?? "?", 9)
            + "  " + pad(side.startCPUSeconds.map { format($0, 2) + " s" } ?? "?", 9)
            + "  " + pad(seeding, 13)
            + "   " + side.rssSamplesKiB.map { format(Double($0) / 1024, 1) }.joined(separator: ", ")
    }

    private func row(_ s: LatencySummary) -> String {
        [s.p50, s.p90, s.p99, s.mean].map { pad(format($0, 1), 8) }.joined(separator: "  ")
    }

    private func verdict(_ met: Bool) -> String { met ? "MET" : "MISSED" }
}

func format(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

/// Bytes in MB (10^6), one decimal.
func megabytes(_ bytes: Int) -> String {
    format(Double(bytes) / 1_000_000, 1) + " MB"
}

func mebibytes(_ kib: Int) -> String {
    format(Double(kib) / 1024, 1) + " MiB"
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}
