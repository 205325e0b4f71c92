import FoundationEssentials

/// The OpenAPI 3.1 document served at GET /openapi.json: the file `openapi/openapi.json`, found
/// at start-up the way `sql/` is (`HERALD_OPENAPI_FILE` names another), read once and served as
/// its bytes. `make test` lints it (openapi-spec-validator), checks that it names exactly the
/// routes the router serves (OpenAPITests), and runs schemathesis against the live server with it.
public struct OpenAPIDocument: Sendable {
    public let bytes: [UInt8]

    public static func load(configured: String?) throws -> OpenAPIDocument {
        let path = configured ?? Resources.locate("openapi/openapi.json") { FileManager.default.isReadableFile(atPath: $0) }
        guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else {
            throw ConfigurationError(variable: "HERALD_OPENAPI_FILE", message: "cannot read the OpenAPI document at \(path)")
        }
        return OpenAPIDocument(bytes: Array(data))
    }
}
