import Foundation
import Testing

@Suite("How tests tear down")
struct TeardownHygieneTests {
    /// A teardown in an unawaited task can still be running (or not yet started) when the next
    /// test begins, so a failing test leaves its daemon, testbed or dnsmasq behind. Tests use
    /// `EndToEndFixture.with { fixture in … }` or `withTearDown { … } run: { … }` instead.
    @Test("no test under Tests/ tears down in an unawaited task (defer + Task)")
    func teardownsAreAwaited() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let pattern = try Regex(#"defer\s*\{\s*Task(\.detached)?\s*\{"#)
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        var checked = 0
        var offenders: [String] = []
        for case let url as URL in files where url.pathExtension == "swift" {
            checked += 1
            let text = try String(contentsOf: url, encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") && line.contains(pattern) {
                offenders.append("\(url.path.dropFirst(tests.path.count + 1)):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(checked > 50, "the test files were found under \(tests.path)")
        #expect(offenders.isEmpty, "await teardowns (EndToEndFixture.with, withTearDown) instead of:\n\(offenders.joined(separator: "\n"))")
    }
}
