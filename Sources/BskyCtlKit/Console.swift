import Foundation
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

    private static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
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
