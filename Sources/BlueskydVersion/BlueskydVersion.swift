/// blueskyd's version, written in this one place: `blueskyd --version`, `bskyctl --version` and
/// the daemon's `daemon.info` all report it. The manual pages' headers repeat it as text, and
/// scripts/check-packaging fails when they disagree with the built binaries.
public let blueskydVersion = "0.1.0"
