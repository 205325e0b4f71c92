import HeraldDomain
import HeraldStore
import FoundationEssentials
import JSON

/// The OpenAPI 3.1 document served at GET /openapi.json: the file `openapi/openapi.json`, found
/// at start-up the way `sql/` is (`HERALD_OPENAPI_FILE` names another), read once and served as
/// bytes, as it is. The file holds the `/v1/me/…` mirror of its user routes too (SPEC §15), so
/// that what chat clients call is documented where readers and tools look:
/// `scripts/openapi_me.py --write` writes it, and `OpenAPIFileTests` checks that the file equals
/// `withUserMirror` of itself. `make test` lints the file (openapi-spec-validator), checks that it
/// names exactly the routes the router serves (OpenAPITests), and runs schemathesis against the
/// live server with it.
package struct OpenAPIDocument: Sendable {
    package let bytes: [UInt8]

    package static func load(configured: String?) throws -> OpenAPIDocument {
        let path = configured ?? Resources.locate("openapi/openapi.json") { FileManager.default.isReadableFile(atPath: $0) }
        guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else {
            throw ConfigurationError(variable: "HERALD_OPENAPI_FILE", message: "cannot read the OpenAPI document at \(path)")
        }
        guard (try? JSONParser.parse(Array(data), maxDepth: 64)) != nil else {
            throw ConfigurationError(variable: "HERALD_OPENAPI_FILE", message: "the OpenAPI document at \(path) is not JSON")
        }
        return OpenAPIDocument(bytes: Array(data))
    }

    /// The document with a `/v1/me/…` operation for each `/v1/users/{uid}/…` one: no `uid` or
    /// `X-App-Id` parameter, the `userToken` scheme, and the user-token 401. The rule the file's
    /// `/v1/me/…` entries follow (checked by `OpenAPIFileTests`).
    package static func withUserMirror(_ document: JSONValue) -> JSONValue {
        guard case .object(var root) = document, case .object(var paths)? = root["paths"] else { return document }
        let dropped: Set<JSONValue> = [.string("#/components/parameters/Uid"), .string("#/components/parameters/XAppId")]
        for (path, item) in paths where path.hasPrefix(UserRoutes.userPrefix) {
            guard case .object(let operations) = item else { continue }
            var mirrored: [String: JSONValue] = [:]
            for (method, operation) in operations {
                guard case .object(var op) = operation else { mirrored[method] = operation; continue }
                if case .array(let parameters)? = op["parameters"] {
                    op["parameters"] = .array(parameters.filter { parameter in
                        guard case .object(let fields) = parameter, let reference = fields["$ref"] else { return true }
                        return !dropped.contains(reference)
                    })
                }
                if case .string(let id)? = op["operationId"] {
                    op["operationId"] = .string("me" + id.prefix(1).uppercased() + id.dropFirst())
                }
                let description: String = if case .string(let text)? = op["description"] { text } else { "" }
                let intro = "With a user token (SPEC §15): `\(method.uppercased()) \(path)` for the token's `sub`, same body and answers."
                let rest = description.components(separatedBy: "\n\nAllowed:").first ?? ""
                op["description"] = .string(intro + (rest.isEmpty ? "" : "\n\n" + rest) + "\n\nAllowed: user tokens only; API keys and the admin token get 403.")
                op["security"] = .array([.object(["userToken": .array([])])])
                if case .object(var responses)? = op["responses"] {
                    responses["401"] = .object(["$ref": .string("#/components/responses/TokenUnauthorized")])
                    responses["429"] = .object(["$ref": .string("#/components/responses/TooManyRequests")])
                    op["responses"] = .object(responses)
                }
                mirrored[method] = .object(op)
            }
            paths[UserRoutes.mirrorPath(of: path)] = .object(mirrored)
        }
        root["paths"] = .object(paths)
        return .object(root)
    }
}
