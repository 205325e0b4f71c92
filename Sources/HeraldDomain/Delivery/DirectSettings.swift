import HTTPTypes
import JSON
import Secrets

/// The provider blocks of delivery `mode: "direct"` (SPEC §13.4). What a block shows and stores
/// is its public part; its secret (the APNs `.p8` key, the service account's private key) is
/// written to `delivery_credentials` by the PATCH that gives it and never read back out: the
/// settings show `privateKeySet` / `serviceAccountSet`, derived when they are read.
package struct APNsSettings: Sendable, Equatable {
    package var teamID = ""
    package var keyID = ""
    package var topic: String?
    package var endpoint = "https://api.push.apple.com"
    package var sandboxEndpoint = "https://api.sandbox.push.apple.com"
    /// Derived: whether the app's key is stored.
    package var privateKeySet = false

    package var json: JSONValue {
        .object(["teamId": .string(teamID), "keyId": .string(keyID), "topic": topic.map(JSONValue.string) ?? .null,
                 "endpoint": .string(endpoint), "sandboxEndpoint": .string(sandboxEndpoint), "privateKeySet": .bool(privateKeySet)])
    }
}

package struct FCMSettings: Sendable, Equatable {
    package var projectID = ""
    /// From the service account: who the access token is for, and where it is asked for.
    package var clientEmail = ""
    package var tokenURI = "https://oauth2.googleapis.com/token"
    package var endpoint = "https://fcm.googleapis.com"
    /// Derived: whether the service account's private key is stored.
    package var serviceAccountSet = false

    package var json: JSONValue {
        .object(["projectId": .string(projectID), "clientEmail": .string(clientEmail), "tokenUri": .string(tokenURI),
                 "endpoint": .string(endpoint), "serviceAccountSet": .bool(serviceAccountSet)])
    }
}

package struct WebPushSettings: Sendable, Equatable {
    /// VAPID's `sub`: `mailto:…` or `https://…`, how a push service reaches the app's operator.
    package var subject = ""

    package var json: JSONValue { .object(["subject": .string(subject)]) }
}

/// A secret given by a PATCH, for `delivery_credentials`: the kind (`apns`, `fcm`) and the key's
/// PKCS#8 PEM. Nil `pem`: the block was removed, and its secret goes with it.
package struct CredentialChange: Sendable, Equatable {
    package let kind: CredentialKind
    package let pem: String?

    package init(kind: CredentialKind, pem: String?) {
        self.kind = kind
        self.pem = pem
    }
}

/// The kinds of `delivery_credentials` (the database keeps the name).
package enum CredentialKind: String, Sendable {
    /// The APNs `.p8` key.
    case apns
    /// The FCM service account's key.
    case fcm
    /// The app's Web Push key pair.
    case vapid
}

extension DeliverySettings {
    package static let maxNameLength = 128

    /// Merges a PATCH of `delivery.apns` (null removes the block and its key).
    package static func applyAPNs(_ value: JSONValue, to current: APNsSettings?, field: String, stored: Bool,
                          changes: inout [CredentialChange]) throws(HTTPError) -> APNsSettings? {
        if value == .null {
            if !stored { changes.append(CredentialChange(kind: .apns, pem: nil)) }
            return nil
        }
        guard case .object(let object) = value else { throw PreferenceField.invalid("\(field) must be an object or null", field: field) }
        var block = current ?? APNsSettings()
        var keyGiven = false
        for (name, item) in object {
            let path = "\(field).\(name)"
            switch name {
            case "teamId": block.teamID = try Self.name(item, path)
            case "keyId": block.keyID = try Self.name(item, path)
            case "topic": block.topic = item == .null ? nil : try Self.name(item, path, max: 255)
            case "endpoint": block.endpoint = try endpoint(item, path)
            case "sandboxEndpoint": block.sandboxEndpoint = try endpoint(item, path)
            case "privateKey" where !stored:
                // never echoed, not even in the error
                guard case .string(let pem) = item, let key = PrivateKey.pem(pem), key.isP256 else {
                    throw PreferenceField.invalid("\(path) must be the PEM text of the APNs .p8 key (an EC P-256 private key)", field: path)
                }
                changes.append(CredentialChange(kind: .apns, pem: key.pkcs8PEM))
                keyGiven = true
            case "privateKeySet" where stored: break
            case "privateKeySet":
                throw PreferenceField.invalid("\(path) is set by Herald: give \(field).privateKey", field: path)
            default:
                throw PreferenceField.invalid("\(path) is not known", field: path)
            }
        }
        if !stored {
            if block.teamID.isEmpty { throw PreferenceField.invalid("\(field).teamId is required", field: field + ".teamId") }
            if block.keyID.isEmpty { throw PreferenceField.invalid("\(field).keyId is required", field: field + ".keyId") }
            if !keyGiven, !(current?.privateKeySet ?? false) {
                throw PreferenceField.invalid("\(field).privateKey is required", field: field + ".privateKey")
            }
            if keyGiven { block.privateKeySet = true }
        }
        return block
    }

    /// Merges a PATCH of `delivery.fcm` (null removes the block and its key). The service account
    /// is the JSON Google gives (as an object, or as its text): its `client_email` and `token_uri`
    /// are kept in the settings, its `private_key` as the secret.
    package static func applyFCM(_ value: JSONValue, to current: FCMSettings?, field: String, stored: Bool,
                         changes: inout [CredentialChange]) throws(HTTPError) -> FCMSettings? {
        if value == .null {
            if !stored { changes.append(CredentialChange(kind: .fcm, pem: nil)) }
            return nil
        }
        guard case .object(let object) = value else { throw PreferenceField.invalid("\(field) must be an object or null", field: field) }
        var block = current ?? FCMSettings()
        var keyGiven = false
        for (name, item) in object {
            let path = "\(field).\(name)"
            switch name {
            case "projectId": block.projectID = try Self.name(item, path)
            case "endpoint": block.endpoint = try endpoint(item, path)
            case "clientEmail" where stored: block.clientEmail = try Self.name(item, path, max: 320)
            case "tokenUri" where stored: block.tokenURI = try endpoint(item, path)
            case "serviceAccountSet" where stored: break
            case "serviceAccount" where !stored:
                var account = item
                if case .string(let text) = item, let parsed = try? JSONParser.parse(Array(text.utf8)) { account = parsed }
                guard case .object(let fields) = account else {
                    throw PreferenceField.invalid("\(path) must be the service account's JSON", field: path)
                }
                guard case .string(let email)? = fields["client_email"], !email.isEmpty, email.utf8.count <= 320 else {
                    throw PreferenceField.invalid("\(path).client_email is required", field: path + ".client_email")
                }
                guard case .string(let pem)? = fields["private_key"], let key = PrivateKey.pem(pem), key.isRSA2048 else {
                    throw PreferenceField.invalid("\(path).private_key must be the service account's RSA private key (PEM)",
                                                  field: path + ".private_key")
                }
                if let uri = fields["token_uri"] { block.tokenURI = try endpoint(uri, path + ".token_uri") }
                block.clientEmail = email
                changes.append(CredentialChange(kind: .fcm, pem: key.pkcs8PEM))
                keyGiven = true
            case "clientEmail", "tokenUri", "serviceAccountSet":
                throw PreferenceField.invalid("\(path) is set by Herald from \(field).serviceAccount", field: path)
            default:
                throw PreferenceField.invalid("\(path) is not known", field: path)
            }
        }
        if !stored {
            if block.projectID.isEmpty { throw PreferenceField.invalid("\(field).projectId is required", field: field + ".projectId") }
            if !keyGiven, !(current?.serviceAccountSet ?? false) {
                throw PreferenceField.invalid("\(field).serviceAccount is required", field: field + ".serviceAccount")
            }
            if keyGiven { block.serviceAccountSet = true }
        }
        return block
    }

    /// Merges a PATCH of `delivery.webpush` (null removes it; the VAPID key pair stays, since the
    /// browsers' subscriptions were made with its public key).
    package static func applyWebPush(_ value: JSONValue, field: String) throws(HTTPError) -> WebPushSettings? {
        if value == .null { return nil }
        guard case .object(let object) = value else { throw PreferenceField.invalid("\(field) must be an object or null", field: field) }
        var block = WebPushSettings()
        for (name, item) in object {
            guard name == "subject" else { throw PreferenceField.invalid("\(field).\(name) is not known", field: "\(field).\(name)") }
            guard case .string(let subject) = item, subject.utf8.count <= maxURLLength,
                  subject.hasPrefix("mailto:") && subject.count > 7 || subject.hasPrefix("https://") && isValidURL(subject) else {
                throw PreferenceField.invalid("\(field).subject must be a mailto: or https: URL", field: field + ".subject")
            }
            block.subject = subject
        }
        if block.subject.isEmpty { throw PreferenceField.invalid("\(field).subject is required", field: field + ".subject") }
        return block
    }

    /// An identifier such as a team id, key id, topic or project id: 1–`max` printable characters.
    package static func name(_ value: JSONValue, _ field: String, max: Int = maxNameLength) throws(HTTPError) -> String {
        guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= max,
              !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || $0 == "/" }) else {
            throw PreferenceField.invalid("\(field) must be 1-\(max) characters without spaces or slashes", field: field)
        }
        return text
    }

    /// A provider's endpoint: an `https` URL (SPEC §13.4), without a trailing slash.
    package static func endpoint(_ value: JSONValue, _ field: String) throws(HTTPError) -> String {
        guard case .string(var text) = value, text.lowercased().hasPrefix("https://"), isValidURL(text) else {
            throw PreferenceField.invalid("\(field) must be an https URL", field: field)
        }
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    /// The endpoints a PATCH names that Herald would connect to: the URL of `webhook`/`gorush`
    /// and the providers' endpoints of `direct`, by field.
    package static func endpoints(inPatch patch: JSONValue) -> [(field: String, url: String)] {
        guard case .object(let delivery)? = patch["delivery"] else { return [] }
        var found: [(String, String)] = []
        if case .string(let url)? = delivery["url"] { found.append(("delivery.url", url)) }
        for (block, names) in [("apns", ["endpoint", "sandboxEndpoint"]), ("fcm", ["endpoint"])] {
            for name in names { if case .string(let url)? = delivery[block]?[name] { found.append(("delivery.\(block).\(name)", url)) } }
        }
        var account = delivery["fcm"]?["serviceAccount"]
        if case .string(let text)? = account { account = try? JSONParser.parse(Array(text.utf8)) }
        if case .string(let url)? = account?["token_uri"] { found.append(("delivery.fcm.serviceAccount.token_uri", url)) }
        return found
    }
}
