import JSONRPC
import Testing

@Suite("LineFramer")
struct LineFramerTests {
    private func lines(_ strings: String...) -> [LineFramer.Event] {
        strings.map { .line(Array($0.utf8)) }
    }

    @Test("splits on newlines and keeps a partial line for the next bytes")
    func splitsAcrossChunks() {
        var framer = LineFramer(maxLineBytes: 100)
        #expect(framer.append(Array("one\ntw".utf8)) == lines("one"))
        #expect(framer.append(Array("o\nthree\n".utf8)) == lines("two", "three"))
        #expect(framer.bufferedByteCount == 0)
    }

    @Test("strips exactly one trailing carriage return")
    func stripsCarriageReturn() {
        var framer = LineFramer(maxLineBytes: 100)
        #expect(framer.append(Array("a\r\nb\r\r\nc\r".utf8)) == lines("a", "b\r"))
        #expect(framer.append(Array("\n".utf8)) == lines("c"))
    }

    @Test("accepts a line of exactly the limit, with or without CR")
    func exactLimit() {
        var framer = LineFramer(maxLineBytes: 4)
        #expect(framer.append(Array("abcd\nabcd\r\n".utf8)) == lines("abcd", "abcd"))
        #expect(framer.append(Array("abcde\n".utf8)) == [.tooLong])
    }

    @Test("reports an overlong line once, skips it without buffering, and recovers")
    func overlongLine() {
        var framer = LineFramer(maxLineBytes: 8)
        var events = framer.append(Array("0123456789".utf8))
        #expect(events == [.tooLong])
        for _ in 0..<1000 {
            events += framer.append(Array(repeating: UInt8(ascii: "x"), count: 1000))
            #expect(framer.bufferedByteCount == 0)
        }
        events += framer.append(Array("tail\nok\n".utf8))
        #expect(events == [.tooLong] + lines("ok"))
    }

    @Test("an overlong line arriving byte by byte is reported once")
    func overlongBytewise() {
        var framer = LineFramer(maxLineBytes: 3)
        var events: [LineFramer.Event] = []
        for byte in Array("abcdefgh\nxy\n".utf8) {
            events += framer.append([byte])
            #expect(framer.bufferedByteCount <= 4)
        }
        #expect(events == [.tooLong] + lines("xy"))
    }

    @Test("end of stream yields an unterminated last line, but not the rest of an overlong one")
    func finish() {
        var framer = LineFramer(maxLineBytes: 5)
        _ = framer.append(Array("last".utf8))
        #expect(framer.finish() == .line(Array("last".utf8)))
        #expect(framer.finish() == nil)
        _ = framer.append(Array("much too long".utf8))
        #expect(framer.finish() == nil)
    }

    @Test("yields empty lines (the server decides to skip them)")
    func emptyLines() {
        var framer = LineFramer(maxLineBytes: 5)
        #expect(framer.append(Array("\n\r\n".utf8)) == lines("", ""))
    }
}
