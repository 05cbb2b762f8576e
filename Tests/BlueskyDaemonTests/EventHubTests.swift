import Foundation
import JSONRPC
import Testing

@testable import BlueskyDaemon

@Suite("The event hub: numbering, history, filters and bounded backlogs")
struct EventHubTests {
    private static let alice = PublishedEvent.AccountKeys(id: UUID(), did: "did:plc:alice", handle: "alice.test")
    private static let bob = PublishedEvent.AccountKeys(id: UUID(), did: "did:plc:bob", handle: "bob.test")

    /// The params of each line a subscription hands out now, without waiting.
    private func drain(_ subscription: EventSubscription) async -> [JSONValue] {
        subscription.finish()
        var all: [JSONValue] = []
        while let lines = await subscription.nextLines() {
            for line in lines {
                let message = try? JSONValue.parse(Array(line.dropLast()))
                var params = message?["params"]?.objectValue ?? [:]
                if message?["method"] != "event" { params["kind"] = message?["method"] }
                all.append(.object(params))
            }
        }
        return all
    }

    @Test("events are numbered from the start value in order and reach every matching subscriber")
    func numberingAndFilters() async {
        let hub = EventHub(firstSeq: 100)
        let (everything, latest) = hub.subscribe(.everything, since: nil)!
        #expect(latest == 100)
        let (onlyBob, _) = hub.subscribe(EventFilter(kinds: nil, accounts: ["@Bob.Test"]), since: nil)!
        let (onlyStops, _) = hub.subscribe(EventFilter(kinds: [.daemonStopping], accounts: nil), since: nil)!
        hub.publish(.accountRefreshed, account: Self.alice)
        hub.publish(.accountNeedsLogin, account: Self.bob, fields: ["reason": "revoked"])
        hub.publish(.daemonStopping)
        let all = await drain(everything)
        #expect(all.map { $0["seq"]?.intValue } == [101, 102, 103])
        #expect(all.map { $0["kind"]?.stringValue } == ["account.refreshed", "account.needsLogin", "daemon.stopping"])
        #expect(all[1]["reason"] == "revoked")
        #expect(await drain(onlyBob).map { $0["kind"]?.stringValue } == ["account.needsLogin", "daemon.stopping"],
                "an accounts filter still passes daemon-wide events")
        #expect(await drain(onlyStops).map { $0["kind"]?.stringValue } == ["daemon.stopping"])
    }

    @Test("a subscriber that does not read keeps at most its backlog, then learns how many it missed")
    func boundedBacklog() async {
        let hub = EventHub(backlogLimit: 10, firstSeq: 0)
        let (slow, _) = hub.subscribe(.everything, since: nil)!
        for _ in 0..<25 { hub.publish(.accountRefreshed, account: Self.alice) }
        #expect(hub.largestBacklog == 10)
        let got = await drain(slow)
        #expect(got.first?["kind"] == "events.gap")
        #expect(got.first?["missed"]?.intValue == 15)
        #expect(got.first?["firstMissedSeq"]?.intValue == 1)
        #expect(got.first?["lastMissedSeq"]?.intValue == 15)
        #expect(got.dropFirst().map { $0["seq"]?.intValue } == Array(16...25))
    }

    @Test("since replays what the history holds; older or unknown numbers get a history gap")
    func since() async {
        let hub = EventHub(historyLimit: 5, firstSeq: 1_000)
        for _ in 0..<8 { hub.publish(.accountRefreshed, account: Self.alice) }
        let (resumed, latest) = hub.subscribe(.everything, since: 1_005)!
        #expect(latest == 1_008)
        #expect(await drain(resumed).map { $0["seq"]?.intValue } == [1_006, 1_007, 1_008])
        let (upToDate, _) = hub.subscribe(.everything, since: 1_008)!
        #expect(await drain(upToDate).isEmpty)
        for stale in [UInt64(1_002), 1, 5_000] {
            let (gapped, _) = hub.subscribe(.everything, since: stale)!
            let got = await drain(gapped)
            #expect(got.map { $0["kind"]?.stringValue } == ["events.gap"], "since \(stale)")
            #expect(got.first?["reason"] == "history")
            #expect(got.first?["oldestSeq"]?.intValue == 1_004)
        }
    }

    @Test("a replay longer than the backlog is delivered whole; a closed hub refuses subscribers and ends streams")
    func replayAndClose() async {
        let hub = EventHub(historyLimit: 100, backlogLimit: 4, firstSeq: 0)
        for _ in 0..<50 { hub.publish(.accountRefreshed, account: Self.bob) }
        let (resumed, _) = hub.subscribe(.everything, since: 0)!
        let (waiting, _) = hub.subscribe(.everything, since: nil)!
        hub.close(last: .daemonStopping)
        #expect(hub.subscribe(.everything, since: nil) == nil)
        let replayed = await drain(resumed)
        #expect(replayed.count == 51 && !replayed.contains { $0["kind"] == "events.gap" })
        #expect(await drain(waiting).map { $0["kind"]?.stringValue } == ["daemon.stopping"])
        hub.publish(.accountRefreshed, account: Self.bob)
        #expect(hub.latestSeq == 51, "nothing is published after close")
    }

    @Test("daemon.stopping is the last event, whatever other threads publish while the hub closes")
    func stoppingIsLast() async {
        // Found by EventStreamTests: a profile fetch ending between the stopping event and the
        // close put account.profileUpdated after daemon.stopping. Publishers race the close here.
        for round in 0..<50 {
            let hub = EventHub(historyLimit: 100_000, backlogLimit: 100_000, firstSeq: 0)
            let (subscription, _) = hub.subscribe(.everything, since: nil)!
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask { for _ in 0..<200 { hub.publish(.accountProfileUpdated, account: Self.alice) } }
                }
                group.addTask { hub.close(last: .daemonStopping) }
            }
            let kinds = await drain(subscription).map { $0["kind"]?.stringValue }
            #expect(kinds.last == "daemon.stopping", "round \(round): \(kinds.suffix(3))")
        }
    }

    @Test("cancelling wakes a connection waiting for events with the end, and leaves the hub")
    func cancel() async {
        let hub = EventHub(firstSeq: 0)
        let (subscription, _) = hub.subscribe(.everything, since: nil)!
        #expect(hub.subscriberCount == 1)
        let next = Task { await subscription.nextLines() }
        while !subscription.isWaiting { await Task.yield() }
        subscription.cancel()
        #expect(await next.value == nil)
        #expect(hub.subscriberCount == 0)
        #expect(await subscription.nextLines() == nil, "and stays ended")
    }
}
