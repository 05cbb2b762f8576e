import Foundation
import Testing
@testable import BskyCtlKit

/// What bskyctl does itself instead of taking it from Foundation: each checked against what
/// Foundation answers for the same input, so dropping Foundation changed nothing a user sees.
@Suite struct SystemBasicsTests {
    @Test("paths split as NSString splits them",
          arguments: ["/usr/bin/python3", "python3", "/", "/x", "dir/", "/run/user/1000/blueskyd/rpc.sock", "a/b/c", "//x"])
    func pathComponents(_ path: String) {
        #expect(FilePath.lastComponent(path) == (path as NSString).lastPathComponent)
        #expect(FilePath.directory(of: path) == (path as NSString).deletingLastPathComponent)
    }

    @Test("a standardised path drops . and empty components, takes .. lexically and follows every symbolic link")
    func standardised() throws {
        let root = FileManager.default.temporaryDirectory.path + "/system-basics-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root + "/real/inner", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createSymbolicLink(atPath: root + "/absolute", withDestinationPath: root + "/real")
        try FileManager.default.createSymbolicLink(atPath: root + "/relative", withDestinationPath: "real/inner")
        try FileManager.default.createSymbolicLink(atPath: root + "/chained", withDestinationPath: "relative")
        // Where the directory exists, the answer is the kernel's own name for it.
        for path in [root + "/absolute/inner", root + "/relative", root + "/chained", root + "/chained/..", root + "/./real//inner/",
                     root + "/real/inner/../../absolute", "/", "/..", "/usr/../usr/bin"] {
            let real = try #require(realpath(path, nil), "\(path)")
            defer { free(real) }
            #expect(FilePath.standardised(path) == String(cString: real), "\(path)")
        }
        // Where it does not, as NSString has it.
        for path in [root + "/missing/x", root + "/missing/../y/./z/"] {
            #expect(FilePath.standardised(path) == (path as NSString).standardizingPath, "\(path)")
        }
    }

    @Test("a link loop ends after 32 links instead of spinning")
    func linkLoop() throws {
        let root = FileManager.default.temporaryDirectory.path + "/system-basics-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createSymbolicLink(atPath: root + "/a", withDestinationPath: root + "/b")
        try FileManager.default.createSymbolicLink(atPath: root + "/b", withDestinationPath: root + "/a")
        #expect(FilePath.standardised(root + "/a").hasPrefix(root + "/"))
    }

    @Test("an account name becomes one URL path segment: / ? # % and non-ASCII encoded, as Foundation's urlPathAllowed without them",
          arguments: ["did:plc:abc", "alice@mastodon.example", "a/b?c#d%e", "nöel", "x y+z", "~user_1.2-3", "a;b=c&d$e'(f)*,!", "\u{7F}\u{1}[]"])
    func segment(_ account: String) {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#%")
        #expect(FilePath.encodedSegment(account) == account.addingPercentEncoding(withAllowedCharacters: allowed))
    }

    @Test("trimming takes what Foundation's whitespace sets take",
          arguments: ["  a b \t", "\n x \n", "\u{00A0}y\u{2003}", "", "   ", "\tz\r\n"])
    func trimming(_ text: String) {
        #expect(text.trimmingSpaces() == text.trimmingCharacters(in: .whitespaces))
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
