import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads secrets the safe ways: from the terminal with echo off, or from the first line of a
/// piped stdin. Never from argv or the environment, where other processes could see them.
enum SecretInput {
    /// True when stdin is a terminal, i.e. a person is typing.
    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// The first line of stdin, without its line ending.
    static func firstLineOfStandardInput() -> String? {
        readLine(strippingNewline: true).map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
    }

    /// Prompts on /dev/tty and reads a line there; nil when there is no controlling terminal.
    /// With `echo: false` the typed characters are not shown.
    static func readFromTerminal(prompt: String, echo: Bool) -> String? {
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var original = termios()
        let canSilence = !echo && tcgetattr(descriptor, &original) == 0
        if canSilence {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            TerminalRestore.arm(descriptor: descriptor, settings: original)
            tcsetattr(descriptor, TCSANOW, &silent)
        }
        defer {
            if canSilence {
                tcsetattr(descriptor, TCSANOW, &original)
                TerminalRestore.disarm()
            }
        }
        // The prompt goes out only once echo is off, so nothing typed after it is ever shown.
        writeString(prompt, to: descriptor)
        return readTerminalLine(descriptor)
    }

    private static func readTerminalLine(_ descriptor: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func writeString(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}

/// Puts the terminal's echo back if the user presses Ctrl-C at a password prompt.
private enum TerminalRestore {
    // Only touched on the main thread and from the signal handler, which runs on it too.
    nonisolated(unsafe) static var descriptor: Int32 = -1
    nonisolated(unsafe) static var settings = termios()

    static func arm(descriptor: Int32, settings: termios) {
        Self.descriptor = descriptor
        Self.settings = settings
        signal(SIGINT, restoreAndExit)
        signal(SIGTERM, restoreAndExit)
    }

    static func disarm() {
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
        descriptor = -1
    }
}

/// The signal handler: async-signal-safe calls only (tcsetattr, write, _exit).
private func restoreAndExit(_ signalNumber: Int32) {
    if TerminalRestore.descriptor >= 0 {
        tcsetattr(TerminalRestore.descriptor, TCSANOW, &TerminalRestore.settings)
        _ = write(TerminalRestore.descriptor, "\n", 1)
    }
    _exit(128 + signalNumber)
}
