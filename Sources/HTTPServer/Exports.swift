// The HTTP vocabulary (methods, errors with their SPEC §3 codes) is its own module, so that the
// domain can name an error without depending on a server; whoever uses the server gets it too
// (swift-nio's `NIO` re-exports `NIOCore` the same way).
@_exported import HTTPTypes
