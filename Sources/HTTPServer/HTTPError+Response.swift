import HTTPTypes
import JSON

extension HTTPError {
    /// The error as a JSON response with its headers.
    public var response: Response {
        var writer = JSONWriter()
        writer.object { body in
            body.field("error") { $0.object { error in
                error.field("code", code)
                error.field("message", message)
                if !params.isEmpty { error.field("params", JSONValue.object(params)) }
            } }
        }
        var response = Response(status: status, headers: [("Content-Type", "application/json")], body: writer.bytes)
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { response.headers.append((name, value)) }
        return response
    }
}
