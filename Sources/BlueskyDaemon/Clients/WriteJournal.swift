import Foundation
import Logging
import RPCServer

/// The journal line of every write (an XRPC procedure) a client makes through blueskyd: who
/// (pid, executable, client), for which account, which method. Never a body or a parameter.
struct WriteJournal: Sendable {
    let logger: Logger

    func record(_ call: XRPCCall, account: UUID?, pid: Int32?, client: ClientPolicy?, status: Int) {
        record(call, account: account, pid: pid, client: client, outcome: { String(status) })
    }

    /// `pid`: the caller's process, nil when it could not be found; `outcome`: the PDS's
    /// status, or the error's name; made only for a write.
    func record(_ call: XRPCCall, account: UUID?, pid: Int32?, client: ClientPolicy?, outcome: () -> String) {
        guard call.kind == .procedure else { return }
        var metadata: Logger.Metadata = [
            "nsid": "\(call.nsid)", "outcome": "\(outcome())",
            "account": "\(account.map { $0.uuidString.lowercased() } ?? call.account ?? "default")",
            "client": "\(client?.name ?? "unrestricted")",
        ]
        if let pid, pid > 0 {
            metadata["pid"] = "\(pid)"
            metadata["exe"] = "\(Self.executable(of: pid) ?? "?")"
        } else {
            metadata["pid"] = "?"
        }
        logger.info("xrpc write", metadata: metadata)
    }

    /// The same for a write to an OAuth 2.0 server's account (any method but GET, HEAD,
    /// OPTIONS): its method and path (never its query, which may carry anything).
    func record(_ call: HTTPCall, account: UUID?, pid: Int32?, client: ClientPolicy?, outcome: () -> String) {
        guard call.isWrite else { return }
        var metadata: Logger.Metadata = [
            "method": "\(call.method)", "path": "\(call.path)", "outcome": "\(outcome())",
            "account": "\(account.map { $0.uuidString.lowercased() } ?? call.account ?? "default")",
            "client": "\(client?.name ?? "unrestricted")",
        ]
        metadata["pid"] = pid.map { $0 > 0 ? "\($0)" : "?" } ?? "?"
        if let pid, pid > 0 { metadata["exe"] = "\(Self.executable(of: pid) ?? "?")" }
        logger.info("http write", metadata: metadata)
    }

    /// The program `pid` runs (`/proc/<pid>/exe`); nil once it has exited or when not ours.
    static func executable(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
