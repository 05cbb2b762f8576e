import Foundation
import JSONRPC
import WebBasics

/// libFuzzer entry point: one input is a client's policy, an NSID as a program wrote it, a
/// query and a body (lines, in that order), as the canonical-request checks meet them.
///
/// Properties: an NSID resolves to one spelling, the same however it was cased, and resolving
/// that spelling again gives it back (what is checked is what is sent); a policy that reads
/// writes out a text that reads back the same; `_method` put before any query is always found.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicy(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = fuzzInput(start, count)
    let lines = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 3, omittingEmptySubsequences: false)
    func line(_ index: Int) -> String? { index < lines.count ? String(decoding: lines[index], as: UTF8.self) : nil }

    if let text = line(0), let grant = try? PermissionGrant(parsing: text) {
        let again = try? PermissionGrant(parsing: grant.description)
        require(again == grant, "the policy \(text) writes out as \(grant.description), which reads as \(String(describing: again))")
    }
    if let nsid = line(1), !nsid.isEmpty, nsid.utf8.allSatisfy({ $0 < 0x80 }) {
        checkCanonical(nsid)
    }
    let query = line(2)
    let body = lines.count > 3 ? Array(lines[3]) : nil
    _ = MethodOverride.find(query: query, body: body)
    require(MethodOverride.find(query: "_method=DELETE&" + (query ?? ""), body: body) != nil, "a leading _method in the query was not found")
    if let body, !body.isEmpty, body.first != UInt8(ascii: "{"), body.first != UInt8(ascii: "["), body.first != UInt8(ascii: "-"),
       !body.first!.isWhitespace {
        require(MethodOverride.find(query: nil, body: Array("_method=put&".utf8) + body) != nil, "a leading _method in a form body was not found")
    }
    return 0
}

private func checkCanonical(_ nsid: String) {
    let lowered = nsid.lowercased()
    switch LexiconMethods.canonical(nsid) {
    case .known(let spelling, let kind):
        require(LexiconMethods.bundled[spelling] == kind, "\(spelling) is not the bundled method it claims")
        require(spelling.lowercased() == lowered, "\(nsid) resolved to another method, \(spelling)")
        require(LexiconMethods.canonical(spelling) == .known(spelling, kind), "\(spelling) does not resolve to itself")
        require(LexiconMethods.canonical(nsid.uppercased()) == .known(spelling, kind), "\(nsid)'s case decides its method")
    case .unknown(let spelling):
        require(spelling.lowercased() == lowered, "\(nsid) was sent as another name, \(spelling)")
        require(LexiconMethods.canonical(spelling) == .unknown(spelling), "\(spelling) does not resolve to itself")
        require(LexiconMethods.bundledByLowercase[lowered] == nil, "\(nsid) is a bundled method sent as unknown")
    case .refused:
        if case .refused = LexiconMethods.canonical(lowered) {} else {
            require(false, "\(nsid) is refused but its lowercase spelling is not")
        }
    }
}

private extension UInt8 {
    var isWhitespace: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}
