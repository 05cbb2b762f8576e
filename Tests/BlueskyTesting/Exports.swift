// The daemon launcher and the helpers around it live in Sources/DaemonHarness, where the bench
// can use them too; the test suites keep getting them from here, as before.
@_exported import DaemonHarness
