import FoundationEssentials
import JSON

extension Request {
    /// The body as a JSON value, read by the one parser every route uses; not JSON → 400. A
    /// string or key holding U+0000 (`\u0000`) is a 400 naming its path too: no route could
    /// store or look it up (PostgreSQL text cannot hold NUL), so it is refused here, for every
    /// route at once, rather than field by field (ingest, which records what it rejects, has
    /// its own rules: `EventParser`).
    public func jsonBody() throws(HTTPError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            throw HTTPError.invalidJSON(error)
        }
        if let path = value.pathOfNUL {
            throw HTTPError.badRequest("\(path.isEmpty ? "body" : path) must not contain NUL characters (U+0000)",
                                       field: path.isEmpty ? nil : path)
        }
        return value
    }

    /// The body as a JSON object (an empty body is `{}`); with `fields`, a key outside them is
    /// a 400 naming it, so a misspelt field is not silently ignored.
    public func jsonObject(fields: Set<String>? = nil) throws(HTTPError) -> [String: JSONValue] {
        if body.isEmpty { return [:] }
        guard case .object(let object) = try jsonBody() else { throw HTTPError.badRequest("body must be a JSON object") }
        if let fields, let unknown = object.keys.sorted().first(where: { !fields.contains($0) }) {
            throw HTTPError.badRequest("\(unknown) is not a field of this body (\(fields.sorted().joined(separator: ", ")))", field: unknown)
        }
        return object
    }

    /// Decodes the body as JSON into `T`; a problem becomes `400 ERR_BAD_REQUEST` whose
    /// `params.field` is the dotted path of the offending input (`jobs[0].attempt`).
    public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws(HTTPError) -> T {
        // The same reader and rules as every other route first (duplicate keys, invalid UTF-8,
        // nesting), then the typed decoding.
        let document = try jsonBody()
        // Foundation's decoder reads an integer beyond 64 bits as a Double, losing digits: such
        // integers reach it as their decimal strings (an id field takes either; SPEC §1).
        let bytes = document.hasBigInteger ? Array(document.bigIntegersAsStrings.jsonText.utf8) : body
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw HTTPError.fromDecoding(error)
        } catch let error as HTTPError {
            throw error
        } catch {
            throw HTTPError.badRequest("body is not valid JSON")
        }
    }
}

extension HTTPError {
    /// Turns a `DecodingError` into a 400 naming the field's path.
    public static func fromDecoding(_ error: DecodingError) -> HTTPError {
        switch error {
        case .keyNotFound(let key, let context):
            let path = fieldPath(context.codingPath + [key])
            return .badRequest("\(path) is required", field: path)
        case .typeMismatch(let type, let context):
            let path = fieldPath(context.codingPath)
            return .badRequest("\(path.isEmpty ? "body" : path) must be \(jsonTypeName(type))",
                               field: path.isEmpty ? nil : path)
        case .valueNotFound(let type, let context):
            let path = fieldPath(context.codingPath)
            return .badRequest("\(path.isEmpty ? "body" : path) must be \(jsonTypeName(type)), not null",
                               field: path.isEmpty ? nil : path)
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return .badRequest("body is not valid JSON")
            }
            let path = fieldPath(context.codingPath)
            return .badRequest("\(path) is invalid: \(context.debugDescription)", field: path)
        @unknown default:
            return .badRequest("body is invalid")
        }
    }

    /// `a.b[2].c` from a coding path.
    public static func fieldPath(_ path: [any CodingKey]) -> String {
        var out = ""
        for key in path {
            if let index = key.intValue, key.stringValue == "Index \(index)" || key.stringValue == String(index) {
                out += "[\(index)]"
            } else {
                if !out.isEmpty { out += "." }
                out += key.stringValue
            }
        }
        return out
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") || name.hasPrefix("[") { return "an array" }
            return "an object"
        }
    }
}
