import HTTPTypes
import JSON

/// The app setting `delivery` (SPEC §13.3): who sends the app's jobs. `pull`: push senders claim
/// them (SPEC §9); `webhook` and `gorush`: Herald claims them and POSTs each to `url`; `direct`:
/// Herald sends each to its devices through APNs, FCM and Web Push (SPEC §13.4, `DirectSettings`).
package struct DeliverySettings: Sendable, Equatable {
    package enum Mode: String, Sendable, CaseIterable {
        case pull, webhook, gorush, direct
    }

    package var mode = Mode.pull
    package var url: String?
    package var timeoutMs = 5000
    package var concurrency = 8
    /// Whether a signing secret exists: read from the secrets (`PreferenceStore.settings`),
    /// never stored or patched.
    package var secretSet = false
    /// The providers of `direct` (SPEC §13.4); nil: none, and that platform's devices are skipped.
    package var apns: APNsSettings?
    package var fcm: FCMSettings?
    package var webpush: WebPushSettings?
    /// The secrets the last `apply` was given or removed, for the PATCH to store; never shown.
    package var credentialChanges: [CredentialChange] = []

    package init() {}

    package static let timeoutRange = 100...60_000
    package static let concurrencyRange = 1...64
    package static let maxURLLength = 2048

    package var json: JSONValue {
        var object: [String: JSONValue] = ["mode": .string(mode.rawValue), "timeoutMs": .int(timeoutMs),
                                           "concurrency": .int(concurrency), "secretSet": .bool(secretSet)]
        object["url"] = url.map(JSONValue.string) ?? .null
        object["apns"] = apns?.json ?? .null
        object["fcm"] = fcm?.json ?? .null
        object["webpush"] = webpush?.json ?? .null
        return .object(object)
    }

    /// Merges a PATCH of `delivery` (fields not given keep their value); `stored` (a stored
    /// document) passes over `secretSet`, which documents stored before it was derived carry. A
    /// push mode needs a `url`.
    package mutating func apply(patch: JSONValue, field: String, stored: Bool = false) throws(HTTPError) {
        guard case .object(let object) = patch else {
            throw PreferenceField.invalid("\(field) must be an object", field: field)
        }
        var next = self
        next.credentialChanges = []
        for (name, value) in object {
            switch name {
            case "mode":
                guard case .string(let text) = value, let mode = Mode(rawValue: text) else {
                    throw PreferenceField.invalid("\(field).mode must be pull, webhook, gorush or direct", field: field + ".mode")
                }
                next.mode = mode
            case "url":
                if value == .null { next.url = nil; continue }
                guard case .string(let text) = value, Self.isValidURL(text) else {
                    throw PreferenceField.invalid("\(field).url must be an http or https URL of at most \(Self.maxURLLength) characters",
                                                  field: field + ".url")
                }
                next.url = text
            case "timeoutMs":
                guard case .int(let number) = value, Self.timeoutRange.contains(number) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field).timeoutMs must be 100-60000",
                                    params: ["field": .string(field + ".timeoutMs"), "min": 100, "max": 60_000])
                }
                next.timeoutMs = number
            case "concurrency":
                guard case .int(let number) = value, Self.concurrencyRange.contains(number) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field).concurrency must be 1-64",
                                    params: ["field": .string(field + ".concurrency"), "min": 1, "max": 64])
                }
                next.concurrency = number
            case Platform.apns.rawValue:
                next.apns = try Self.applyAPNs(value, to: next.apns, field: field + ".apns", stored: stored, changes: &next.credentialChanges)
            case Platform.fcm.rawValue:
                next.fcm = try Self.applyFCM(value, to: next.fcm, field: field + ".fcm", stored: stored, changes: &next.credentialChanges)
            case Platform.webpush.rawValue:
                next.webpush = try Self.applyWebPush(value, field: field + ".webpush")
            case "secretSet" where stored:
                break
            case "secret", "secretSet":
                throw PreferenceField.invalid("\(field).\(name) is set by Herald: POST /v1/settings/delivery/rotate-secret makes a new secret",
                                              field: "\(field).\(name)")
            default:
                throw PreferenceField.invalid("\(field).\(name) is not known", field: "\(field).\(name)")
            }
        }
        if next.mode == .webhook || next.mode == .gorush, next.url == nil {
            throw PreferenceField.invalid("\(field).url is required when \(field).mode is \(next.mode.rawValue)", field: field + ".url")
        }
        self = next
    }

    /// Why a URL is refused, or a send failed for good, when its host is internal: the same words
    /// for both, and never the address (which would tell what an internal name resolves to).
    package static let internalAddressMessage = "the delivery URL's host is, or resolves to, a loopback, private, link-local, "
        + "unique-local or unspecified address (HERALD_DELIVERY_ALLOW_PRIVATE=1 allows it)"

    /// `http://` or `https://`, a host, no whitespace or control characters.
    package static func isValidURL(_ text: String) -> Bool {
        guard text.utf8.count <= maxURLLength, !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
            return false
        }
        let lower = text.lowercased()
        for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
            let rest = lower.dropFirst(scheme.count)
            let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            return !host.isEmpty && !host.hasPrefix("@") && !host.hasPrefix(":")
        }
        return false
    }
}
