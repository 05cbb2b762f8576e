extension BskyCtlMain {
    /// The connection options belong to every subcommand, so people also write them first
    /// (`bskyctl --socket PATH accounts`); the parser takes them only after the subcommand's
    /// name, so they are moved there. Anything else is left exactly as given.
    static func movingLeadingConnectionOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--socket" || argument == "--timeout", index + 1 < arguments.endIndex {
                leading += arguments[index...(index + 1)]
                index += 2
            } else if argument.hasPrefix("--socket=") || argument.hasPrefix("--timeout=") {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.endIndex, !arguments[index].hasPrefix("-") else { return arguments }
        return [arguments[index]] + leading + arguments[(index + 1)...]
    }
}
