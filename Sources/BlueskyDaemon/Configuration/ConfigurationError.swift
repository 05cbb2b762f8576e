/// A configuration problem, naming the key (and the file line when known).
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    static func badValue(_ key: String, _ expected: String, file: String?, line: Int?) -> ConfigurationError {
        ConfigurationError("\(location(file, line))\(key): expected \(expected)")
    }

    static func location(_ file: String?, _ line: Int?) -> String {
        switch (file, line) {
        case let (file?, line?): "\(file):\(line): "
        case let (file?, nil): "\(file): "
        default: ""
        }
    }

    public var description: String { message }
}
