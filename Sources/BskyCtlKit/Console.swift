import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to stdout and stderr.
///
/// Everything goes through write(2) so that text and raw bytes (`proxy` bodies) come out in
/// order, and a closed pipe (`bskyctl proxy … | head`) ends output quietly instead of crashing.
enum Console {
    /// Writes `text` and a newline to stdout.
    static func printLine(_ text: String) {
        writeAll(Array((terminalSafe(text) + "\n").utf8), to: STDOUT_FILENO)
    }

    /// Writes raw bytes to stdout.
    static func writeOut(_ bytes: [UInt8]) {
        writeAll(bytes, to: STDOUT_FILENO)
    }

    /// Writes `bskyctl: <message>` to stderr.
    static func printError(_ message: String) {
        writeAll(Array("bskyctl: \(terminalSafe(message))\n".utf8), to: STDERR_FILENO)
    }

    /// Writes a line to stderr as is (notes and warnings already worded for people).
    static func printNote(_ text: String) {
        writeAll(Array((terminalSafe(text) + "\n").utf8), to: STDERR_FILENO)
    }

    /// `text` with every control character but newline and tab shown as `\u{…}`: text that
    /// came from a server (an error message, a reason) cannot move the cursor, clear the
    /// screen or retitle the terminal.
    static func terminalSafe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isEscaped) else { return text }
        var safe = ""
        for scalar in text.unicodeScalars {
            if isEscaped(scalar) {
                safe += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                safe.unicodeScalars.append(scalar)
            }
        }
        return safe
    }

    /// The same characters as JSON escapes (`\u009b`): JSON output stays JSON (a blind attack saw
    /// `\u{9b}` make `bskyctl accounts --json` unparseable). They can stand only inside strings,
    /// and the encoder has escaped the C0 ones there already.
    static func jsonSafe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isEscaped) else { return text }
        var safe = ""
        for scalar in text.unicodeScalars {
            if isEscaped(scalar) {
                let hex = String(scalar.value, radix: 16)
                safe += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                safe.unicodeScalars.append(scalar)
            }
        }
        return safe
    }

    /// Control characters (C0 but newline and tab, DEL, C1), and the bidirectional controls
    /// that make a terminal show the rest of a line reversed (U+202E and its kin).
    private static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // EPIPE and the like: the reader is gone, nothing useful left to do.
                }
            }
        }
    }
}
