import HTTPTypes
import JSON

/// An app's notification settings (SPEC §7.2): a default and an override flag per user-level
/// field, plus the app switches. Stored as the fields that differ from the built-in defaults.
package struct AppSettings: Sendable, Equatable {
    package struct Entry: Sendable, Equatable {
        package var value: JSONValue
        package var userCanOverride: Bool
    }

    package enum PrivacyTemplateMode: String, Sendable, CaseIterable {
        case `default` = "DEFAULT", privacy = "PRIVACY", userChoice = "USER_CHOICE"
    }

    /// CometChat's message-edited and message-deleted settings (SPEC §11.4): whether an edit
    /// updates, and a deletion retracts, what was pushed.
    package enum Notice: String, Sendable, CaseIterable {
        case notify = "NOTIFY", dontNotify = "DONT_NOTIFY"
    }

    package var entries: [String: Entry]
    package var bypassPreferencesForMentions = false
    package var bypassPreferencesForAll = false
    package var privacyTemplateMode = PrivacyTemplateMode.userChoice
    package var largeGroupThreshold = 1000
    /// Events older than this when Herald applies them change state but make no job (SPEC §11.5);
    /// 0 turns the rule off.
    package var maxEventAgeSeconds = 86_400
    /// Update jobs for edited messages already pushed (SPEC §11.4).
    package var messageEdited = Notice.notify
    /// Retract jobs for deleted messages already pushed (SPEC §11.4).
    package var messageDeleted = Notice.notify
    /// Silent sync jobs for pins and saves (SPEC §12.3).
    package var syncJobs = true
    /// How long removed pins and saves (their tombstones) are kept (SPEC §14's retention).
    package var changeRetentionSeconds = 604_800
    /// Web origins allowed to call `/v1/me/…` with a user token (SPEC §15).
    package var corsOrigins: [String] = []
    /// Each user's request budget on `/v1/me/…`, per instance (SPEC §15).
    package var userRateLimit = UserRateLimit.default
    /// Who sends the app's jobs: push senders that claim them, or Herald itself (SPEC §13.3).
    package var delivery = DeliverySettings()

    /// The built-in defaults: the values of SPEC §7.1, every field overridable.
    package static let defaults = AppSettings(entries: Dictionary(uniqueKeysWithValues: PreferenceField.all.map {
        ($0.path, Entry(value: $0.defaultValue, userCanOverride: true))
    }))

    package func entry(_ path: String) -> Entry {
        entries[path] ?? Entry(value: PreferenceField.byPath[path]!.defaultValue, userCanOverride: true)
    }

    /// The age of an event of time `eventTime` (its `sentAt`, `editedAt` or `at`) applied at
    /// `appliedAt`, for `Routing.decide` (SPEC §11.5, the rule in `Routing.EventAge`).
    package func age(of eventTime: Int64, appliedAt: Int64) -> Routing.EventAge {
        Routing.EventAge(eventTime: eventTime, appliedAt: appliedAt, maxEventAgeSeconds: maxEventAgeSeconds)
    }

    /// The settings as the API shows them: nested by group, each field `{value, userCanOverride}`.
    package var json: JSONValue {
        var root: [String: JSONValue] = [:]
        for field in PreferenceField.all {
            let entry = entry(field.path)
            root.setPath(field.path, .object(["value": entry.value, "userCanOverride": .bool(entry.userCanOverride)]))
        }
        root["bypassPreferencesForMentions"] = .bool(bypassPreferencesForMentions)
        root["bypassPreferencesForAll"] = .bool(bypassPreferencesForAll)
        root["privacyTemplateMode"] = .string(privacyTemplateMode.rawValue)
        root["largeGroupThreshold"] = .int(largeGroupThreshold)
        root["maxEventAgeSeconds"] = .int(maxEventAgeSeconds)
        root["messageEdited"] = .string(messageEdited.rawValue)
        root["messageDeleted"] = .string(messageDeleted.rawValue)
        root["syncJobs"] = .bool(syncJobs)
        root["changeRetentionSeconds"] = .int(changeRetentionSeconds)
        root["corsOrigins"] = .array(corsOrigins.map(JSONValue.string))
        root["userRateLimit"] = userRateLimit.json
        root["delivery"] = delivery.json
        return .object(root)
    }

    /// Reads stored settings (written by `json`); unknown or damaged parts fall back to defaults.
    package init(stored: JSONValue) {
        self = .defaults
        try? apply(patch: stored, stored: true)
    }

    package init(entries: [String: Entry]) {
        self.entries = entries
    }

    /// Merges a PATCH body; any invalid part throws `400 ERR_INVALID_PREFERENCE` and changes nothing.
    /// `stored`: the patch is the stored document, which also holds what only Herald writes.
    package mutating func apply(patch: JSONValue, stored: Bool = false) throws(HTTPError) {
        guard case .object(let root) = patch else {
            throw PreferenceField.invalid("the body must be an object", field: "")
        }
        var next = self
        for (key, value) in root {
            switch key {
            case "bypassPreferencesForMentions", "bypassPreferencesForAll", "syncJobs":
                guard case .bool(let flag) = value else { throw PreferenceField.invalid("\(key) must be true or false", field: key) }
                switch key {
                case "bypassPreferencesForMentions": next.bypassPreferencesForMentions = flag
                case "bypassPreferencesForAll": next.bypassPreferencesForAll = flag
                default: next.syncJobs = flag
                }
            case "privacyTemplateMode":
                guard case .string(let name) = value, let mode = PrivacyTemplateMode(rawValue: name) else {
                    throw PreferenceField.invalid("privacyTemplateMode must be DEFAULT, PRIVACY or USER_CHOICE", field: key)
                }
                next.privacyTemplateMode = mode
            case "largeGroupThreshold":
                guard case .int(let threshold) = value, (1...1_000_000).contains(threshold) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "largeGroupThreshold must be 1-1000000",
                                    params: ["field": .string(key), "min": 1, "max": 1_000_000])
                }
                next.largeGroupThreshold = threshold
            case "changeRetentionSeconds":
                guard case .int(let seconds) = value, (60...31_536_000).contains(seconds) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "changeRetentionSeconds must be 60 to 31536000",
                                    params: ["field": .string(key), "min": 60, "max": 31_536_000])
                }
                next.changeRetentionSeconds = seconds
            case "maxEventAgeSeconds":
                guard case .int(let seconds) = value, (0...31_536_000).contains(seconds) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "maxEventAgeSeconds must be 0 (off) to 31536000",
                                    params: ["field": .string(key), "min": 0, "max": 31_536_000])
                }
                next.maxEventAgeSeconds = seconds
            case "messageEdited", "messageDeleted":
                guard case .string(let name) = value, let notice = Notice(rawValue: name) else {
                    throw PreferenceField.invalid("\(key) must be NOTIFY or DONT_NOTIFY", field: key)
                }
                if key == "messageEdited" { next.messageEdited = notice } else { next.messageDeleted = notice }
            case "corsOrigins":
                next.corsOrigins = try CORS.validate(value, field: key)
            case "userRateLimit":
                try next.userRateLimit.apply(patch: value, field: key)
            case "delivery":
                try next.delivery.apply(patch: value, field: key, stored: stored)
            default:
                try PreferenceTree.walk(key: key, value: value) { path, field, input throws(HTTPError) in
                    guard case .object(let object) = input else {
                        throw PreferenceField.invalid("\(path) must be {\"value\", \"userCanOverride\"}", field: path)
                    }
                    var entry = next.entry(path)
                    for (name, item) in object {
                        switch name {
                        case "value": entry.value = try field.validate(item, field: path + ".value", current: entry.value)
                        case "userCanOverride":
                            guard case .bool(let flag) = item else {
                                throw PreferenceField.invalid("\(path).userCanOverride must be true or false", field: path + ".userCanOverride")
                            }
                            entry.userCanOverride = flag
                        default:
                            throw PreferenceField.invalid("\(path).\(name) is not known", field: "\(path).\(name)")
                        }
                    }
                    next.entries[path] = entry
                }
            }
        }
        self = next
    }
}

/// A user's own choices (SPEC §7.3): only the fields the user set.
package struct UserPreferences: Sendable, Equatable {
    package var values: [String: JSONValue]

    package init(values: [String: JSONValue] = [:]) {
        self.values = values
    }

    package init(stored: JSONValue) {
        var values: [String: JSONValue] = [:]
        if case .object(let object) = stored {
            for (path, value) in object where PreferenceField.byPath[path] != nil { values[path] = value }
        }
        self.values = values
    }

    package var stored: JSONValue { .object(values) }

    /// The value in force for `path`: the user's where the app lets users override it, else the app's.
    package func effective(_ path: String, app: AppSettings) -> JSONValue {
        let entry = app.entry(path)
        if entry.userCanOverride, let value = values[path] { return value }
        return entry.value
    }

    /// The effective view in the shape of SPEC §7.1.
    package func effectiveJSON(app: AppSettings) -> JSONValue {
        var root: [String: JSONValue] = [:]
        for field in PreferenceField.all { root.setPath(field.path, effective(field.path, app: app)) }
        return .object(root)
    }

    /// Where each effective value comes from, by field path: `user` (the user's own, in force) or
    /// `app` (the app's default) — what the console marks (`?include=sources`).
    package func sourcesJSON(app: AppSettings) -> JSONValue {
        .object(Dictionary(uniqueKeysWithValues: PreferenceField.all.map { field in
            (field.path, JSONValue.string(app.entry(field.path).userCanOverride && values[field.path] != nil ? "user" : "app"))
        }))
    }

    /// Merges a PATCH body: fields the app does not let users override are ignored (not stored);
    /// any invalid value throws `400 ERR_INVALID_PREFERENCE` and changes nothing.
    package mutating func apply(patch: JSONValue, app: AppSettings) throws(HTTPError) {
        guard case .object(let root) = patch else { throw PreferenceField.invalid("the body must be an object", field: "") }
        var next = self
        for (key, value) in root {
            try PreferenceTree.walk(key: key, value: value) { path, field, input throws(HTTPError) in
                let validated = try field.validate(input, field: path, current: effective(path, app: app))
                if app.entry(path).userCanOverride { next.values[path] = validated }
            }
        }
        self = next
    }
}

/// Walks a nested preference body (`{"groupPreferences": {"replies": …}}`) down to its fields.
package enum PreferenceTree {
    package static let groups: Set<String> = ["groupPreferences", "oneOnOnePreferences", "mutePreferences"]

    package static func walk(key: String, value: JSONValue,
                     _ visit: (String, PreferenceField, JSONValue) throws(HTTPError) -> Void) throws(HTTPError) {
        if groups.contains(key) {
            guard case .object(let object) = value else { throw PreferenceField.invalid("\(key) must be an object", field: key) }
            for (name, item) in object {
                let path = key + "." + name
                guard let field = PreferenceField.byPath[path] else { throw PreferenceField.invalid("\(path) is not known", field: path) }
                try visit(path, field, item)
            }
        } else if let field = PreferenceField.byPath[key] {
            try visit(key, field, value)
        } else {
            throw PreferenceField.invalid("\(key) is not known", field: key)
        }
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    /// Sets `a.b` to `value`, creating the object `a` when needed.
    package mutating func setPath(_ path: String, _ value: JSONValue) {
        let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            self[path] = value
            return
        }
        var inner: [String: JSONValue] = [:]
        if case .object(let existing)? = self[parts[0]] { inner = existing }
        inner[parts[1]] = value
        self[parts[0]] = .object(inner)
    }
}
