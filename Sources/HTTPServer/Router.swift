/// Maps a method and a path to a route value, with `{name}` path parameters.
///
/// When several patterns match a path, the most specific wins: at the first segment where they
/// differ, a literal beats a parameter. A path that matches only under other methods is a 405.
public struct Router<Value: Sendable>: Sendable {
    /// What a lookup found.
    public enum Match: Sendable {
        case found(Value, pattern: String, parameters: [String: String])
        case methodNotAllowed(allowed: [HTTPMethod], pattern: String)
        case notFound
    }

    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private struct Route: Sendable {
        let method: HTTPMethod
        let pattern: String
        let segments: [Segment]
        let value: Value
    }

    private var routes: [Route] = []
    /// Routes by their count of segments: a path is compared only with patterns of its length.
    private var routesByLength: [Int: [Route]] = [:]
    /// Routes without parameters, by method and path: one hash look-up finds them, and no route
    /// that matches the same path is more specific.
    private var literalRoutes: [HTTPMethod: [String: Route]] = [:]

    /// An empty router.
    public init() {}

    /// Every registered (method, pattern) pair, in registration order.
    public var patterns: [(method: HTTPMethod, pattern: String)] {
        routes.map { ($0.method, $0.pattern) }
    }

    /// Every registered route with its value, in registration order (to derive routes from others).
    public var entries: [(method: HTTPMethod, pattern: String, value: Value)] {
        routes.map { ($0.method, $0.pattern, $0.value) }
    }

    /// Registers `value` for `method` on `pattern` (`/v1/apps/{app}/keys`).
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ value: Value) {
        let segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix("{") && part.hasSuffix("}") {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(part)
        }
        precondition(!routes.contains { $0.method == method && $0.segments == segments },
                     "route \(method) \(pattern) registered twice")
        let route = Route(method: method, pattern: pattern, segments: segments, value: value)
        routes.append(route)
        routesByLength[segments.count, default: []].append(route)
        if !segments.contains(where: { if case .parameter = $0 { true } else { false } }) {
            literalRoutes[method, default: [:]]["/" + segments.map { if case .literal(let text) = $0 { text } else { "" } }
                .joined(separator: "/")] = route
        }
    }

    /// Finds the route for `method` and `path`.
    public func match(method: HTTPMethod, path: String) -> Match {
        if let route = literalRoutes[method]?[path.hasPrefix("/") ? path : "/" + path] {
            return .found(route.value, pattern: route.pattern, parameters: [:])
        }
        let parts = Self.split(path)
        var best: (route: Route, parameters: [String: String])?
        var bestForAnyMethod: Route?
        var allowed: [HTTPMethod] = []
        for route in routesByLength[parts.count] ?? [] {
            guard let parameters = Self.bind(route.segments, to: parts) else { continue }
            if let current = bestForAnyMethod {
                if Self.isMoreSpecific(route.segments, than: current.segments) { bestForAnyMethod = route }
            } else {
                bestForAnyMethod = route
            }
            if route.method == method {
                if best == nil || Self.isMoreSpecific(route.segments, than: best!.route.segments) {
                    best = (route, parameters)
                }
            } else if !allowed.contains(route.method) {
                allowed.append(route.method)
            }
        }
        if let best {
            return .found(best.route.value, pattern: best.route.pattern, parameters: best.parameters)
        }
        if let any = bestForAnyMethod {
            return .methodNotAllowed(allowed: allowed.sorted { $0.rawValue < $1.rawValue }, pattern: any.pattern)
        }
        return .notFound
    }

    private static func split(_ path: String) -> [String] {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts.first == "" { parts.removeFirst() }
        return parts
    }

    private static func bind(_ segments: [Segment], to parts: [String]) -> [String: String]? {
        guard segments.count == parts.count else { return nil }
        // Literals first, so a mismatch costs no allocation.
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal): if literal != part { return nil }
            case .parameter: if part.isEmpty { return nil }
            }
        }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            if case .parameter(let name) = segment { parameters[name] = part }
        }
        return parameters
    }

    private static func isMoreSpecific(_ lhs: [Segment], than rhs: [Segment]) -> Bool {
        for (a, b) in zip(lhs, rhs) {
            switch (a, b) {
            case (.literal, .parameter): return true
            case (.parameter, .literal): return false
            default: continue
            }
        }
        return false
    }
}
