import HTTPClient
import HTTPTypes
import HeraldDomain
import JSON

extension DeliverySettings {
    /// SPEC §13.3: a `delivery.url` in `patch` whose host is, or resolves to, an internal address
    /// is `400 ERR_BAD_REQUEST` naming `delivery.url`, unless private addresses are allowed. Run
    /// before the settings are read and saved (it may wait on DNS); each connection is checked
    /// again when a job is sent (`HTTPClient`).
    package static func checkAddress(inPatch patch: JSONValue, allowPrivate: Bool) throws(HTTPError) {
        guard !allowPrivate else { return }
        for (field, url) in endpoints(inPatch: patch) where OutboundAddress.isInternal(url: url) {
            throw HTTPError.badRequest(internalAddressMessage, field: field)
        }
    }
}
