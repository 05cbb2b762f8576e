/// One spelling per method, the one the bundled Lexicons use.
///
/// An NSID's authority is a domain name and so has no case, and the reference PDS routes
/// through Express, whose paths match case-insensitively: `Com.atproto.server.getServiceAuth`
/// reaches the same handler as `com.atproto.server.getServiceAuth`. Everything that decides a
/// permission (the free set, record writers, the `com.atproto.server.` prefix) compares exact
/// spellings, so a call is checked and sent in one canonical spelling or not at all.
public enum CanonicalNSID: Sendable, Equatable {
    /// A method of the bundled Lexicons, in their spelling.
    case known(String, XRPCMethodKind)
    /// A method of a namespace the Lexicons do not cover: its authority lowercased, its name as
    /// written (names are case-sensitive; no server blueskyd knows of folds them).
    case unknown(String)
    /// In a namespace the Lexicons cover but no method of it, whatever the case: what a server
    /// that folds case would make of it cannot be known, so it is not sent.
    case refused(namespace: String)
}

extension LexiconMethods {
    /// The canonical form of a syntactically valid `nsid`.
    public static func canonical(_ nsid: String) -> CanonicalNSID {
        if let kind = bundled[nsid] { return .known(nsid, kind) }
        let lowered = nsid.lowercased()
        if let spelling = bundledByLowercase[lowered], let kind = bundled[spelling] { return .known(spelling, kind) }
        guard let dot = lowered.lastIndex(of: ".") else { return .unknown(nsid) }
        let namespace = String(lowered[..<dot])
        if bundledNamespaces.contains(namespace) { return .refused(namespace: namespace) }
        // NSIDs are ASCII (checked before), so lowercasing keeps every offset.
        let name = nsid.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).last.map { String(decoding: $0, as: UTF8.self) } ?? ""
        return .unknown(namespace + "." + name)
    }

    /// Lowercased spelling → the Lexicons' spelling.
    static let bundledByLowercase: [String: String] = Dictionary(
        bundled.keys.map { ($0.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })

    /// Every authority (all segments but the name, lowercased) that holds a bundled method.
    static let bundledNamespaces: Set<String> = Set(bundled.keys.compactMap { nsid in
        nsid.lastIndex(of: ".").map { String(nsid[..<$0]).lowercased() }
    })
}
