import Foundation
import JSONRPC
import RPCServer

/// `events.subscribe` and `events.unsubscribe`: the connection becomes a stream of event
/// notifications after the reply, beside its other requests.
extension DaemonMethods {
    func subscribe(_ params: Params, context: RPCCallContext) throws(DaemonError) -> JSONValue {
        try params.allowOnly(["kinds", "accounts", "since"])
        guard let outlet = context.streams else { throw .internalError("this connection cannot stream events") }
        var named = try Self.stringList(params, "accounts")
        if let client, let allowed = client.accounts {
            // A restricted client hears of its own accounts only.
            for reference in named ?? [] { _ = try client.account(reference, in: accounts.registry) }
            named = named ?? allowed
        }
        let filter = EventFilter(kinds: try Self.kinds(params), accounts: named)
        let since = try Self.sequenceNumber(params, "since")
        guard !outlet.hasStream else { throw .alreadySubscribed }
        guard let (subscription, latest) = events.subscribe(filter, since: since) else { throw .shuttingDown }
        // Refused (another request subscribed meanwhile): `start` cancelled the subscription.
        guard outlet.start(subscription, after: context.position) else { throw .alreadySubscribed }
        return ["subscribed": true, "seq": .number(Double(latest))]
    }

    func unsubscribe(_ params: Params, context: RPCCallContext) async throws(DaemonError) -> JSONValue {
        try params.allowOnly([])
        let wasSubscribed = context.streams?.hasStream ?? false
        // Returns once the stream's last line is written: nothing follows this reply.
        await context.streams?.stop()
        return ["unsubscribed": .bool(wasSubscribed), "seq": .number(Double(events.latestSeq))]
    }

    private static func kinds(_ params: Params) throws(DaemonError) -> Set<EventKind>? {
        guard let names = try stringList(params, "kinds") else { return nil }
        var kinds = Set<EventKind>()
        for name in names {
            guard let kind = EventKind(rawValue: name) else {
                throw .invalidParams("unknown event kind '\(name)' (known: \(EventKind.names))", field: "kinds")
            }
            kinds.insert(kind)
        }
        return kinds
    }

    private static func stringList(_ params: Params, _ name: String) throws(DaemonError) -> [String]? {
        guard let value = params.value(name) else { return nil }
        guard case .array(let items) = value, !items.isEmpty else {
            throw .invalidParams("\(name) must be a non-empty array of strings", field: name)
        }
        var strings: [String] = []
        for item in items {
            guard let string = item.stringValue, !string.isEmpty else {
                throw .invalidParams("\(name) must be a non-empty array of strings", field: name)
            }
            strings.append(string)
        }
        return strings
    }

    private static func sequenceNumber(_ params: Params, _ name: String) throws(DaemonError) -> UInt64? {
        guard let value = params.value(name) else { return nil }
        guard let number = value.doubleValue, number >= 0, number.rounded() == number, number < 9.0e15 else {
            throw .invalidParams("\(name) must be an event number (an integer of 0 or more)", field: name)
        }
        return UInt64(number)
    }
}
