import FoundationEssentials
import FoundationInternationalization
import HTTPTypes
import JSON

/// One user-level preference field of SPEC §7.1, addressed by its dotted path
/// (`groupPreferences.replies`, `mutePreferences.schedule`, `timezone`).
package struct PreferenceField: Sendable {
    package enum Kind: Sendable {
        /// Enum names; CometChat's integer codes 1…n are aliases in this order.
        case choice([String])
        case schedule
        case boolean
        case timezone
        /// Whole seconds: 0 (off) or within the range (`replyDigestSeconds`, SPEC §17).
        case seconds(ClosedRange<Int>)
    }

    package let path: String
    package let kind: Kind
    package let defaultValue: JSONValue

    /// Every field, in the order of SPEC §7.1.
    package static let all: [PreferenceField] = {
        func choice<T: PreferenceChoice>(_ path: String, _ default: T) -> PreferenceField {
            .init(path: path, kind: .choice(T.names), defaultValue: .string(`default`.rawValue))
        }
        var fields: [PreferenceField] = []
        for group in ["groupPreferences", "oneOnOnePreferences"] {
            fields.append(choice(group + ".messages", MessagesPreference.subscribeToAll))
            fields.append(choice(group + ".replies", RepliesPreference.subscribeToAll))
            fields.append(choice(group + ".quotedReplies", QuotedRepliesPreference.subscribeToAll))
            fields.append(choice(group + ".reactions", ReactionsPreference.ownMessages))
            if group == "groupPreferences" {
                for name in ["memberLeft", "memberAdded", "memberJoined", "memberKicked", "memberBanned", "memberUnbanned",
                             "memberScopeChanged"] {
                    fields.append(choice(group + "." + name, MemberActionPreference.dontSubscribe))
                }
            }
        }
        fields.append(choice("mutePreferences.dnd", DoNotDisturbPreference.disabled))
        fields.append(.init(path: "mutePreferences.schedule", kind: .schedule, defaultValue: Schedule.allDay.json))
        fields.append(.init(path: "usePrivacyTemplate", kind: .boolean, defaultValue: false))
        fields.append(.init(path: "timezone", kind: .timezone, defaultValue: "UTC"))
        fields.append(.init(path: "replyDigestSeconds", kind: .seconds(replyDigestRange), defaultValue: .int(0)))
        return fields
    }()

    /// SPEC §17: a digest window is 5 s to one hour (0: off).
    package static let replyDigestRange = 5...3600

    package static let byPath: [String: PreferenceField] = Dictionary(uniqueKeysWithValues: all.map { ($0.path, $0) })

    /// The canonical value for an input, or `400 ERR_INVALID_PREFERENCE` naming `field`.
    /// `current` is the value in force, for a schedule given in part.
    package func validate(_ input: JSONValue, field: String, current: JSONValue? = nil) throws(HTTPError) -> JSONValue {
        switch kind {
        case .choice(let names):
            if case .string(let name) = input, names.contains(name) { return input }
            if case .int(let code) = input, code >= 1, code <= names.count { return .string(names[code - 1]) }
            throw Self.invalid("\(field) must be one of \(names.joined(separator: ", ")) (or 1-\(names.count))", field: field)
        case .boolean:
            guard case .bool = input else { throw Self.invalid("\(field) must be true or false", field: field) }
            return input
        case .timezone:
            guard case .string(let name) = input, Self.isTimeZone(name) else {
                throw Self.invalid("\(field) must be an IANA time zone name such as Europe/Paris", field: field)
            }
            return input
        case .seconds(let range):
            if case .int(let seconds) = input, seconds == 0 || range.contains(seconds) { return input }
            throw Self.invalid("\(field) must be 0 (off) or whole seconds from \(range.lowerBound) to \(range.upperBound)", field: field)
        case .schedule:
            return try Schedule.validate(input, field: field, current: current.flatMap { Schedule(json: $0) } ?? .allDay).json
        }
    }

    package static func isTimeZone(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 64, !name.contains(".."),
              name.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || "/_-+0123456789".unicodeScalars.contains($0) })
        else { return false }
        return TimeZone(identifier: name) != nil
    }

    package static func invalid(_ message: String, field: String) -> HTTPError {
        HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: message, params: ["field": .string(field)])
    }
}

/// The per-day delivery windows of `mutePreferences.schedule`, in the user's time zone.
package struct Schedule: Sendable, Equatable {
    package struct Day: Sendable, Equatable {
        /// HHMM, 0–2359, minutes < 60, `from ≤ to`: notifications are delivered inside [from, to].
        package var from: Int
        package var to: Int
        /// No notifications that day.
        package var dnd: Bool
    }

    package static let dayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    package var days: [Day]

    package static let allDay = Schedule(days: Array(repeating: Day(from: 0, to: 2359, dnd: false), count: 7))

    package var json: JSONValue {
        var object: [String: JSONValue] = [:]
        for (index, name) in Self.dayNames.enumerated() {
            let day = days[index]
            object[name] = .object(["from": .int(day.from), "to": .int(day.to), "dnd": .bool(day.dnd)])
        }
        return .object(object)
    }

    package init(days: [Day]) { self.days = days }

    /// A stored (already valid) schedule.
    package init?(json: JSONValue) {
        guard case .object(let object) = json else { return nil }
        var days: [Day] = []
        for name in Self.dayNames {
            guard case .object(let day)? = object[name], case .int(let from)? = day["from"], case .int(let to)? = day["to"],
                  case .bool(let dnd)? = day["dnd"] else { return nil }
            days.append(Day(from: from, to: to, dnd: dnd))
        }
        self.days = days
    }

    /// Validates a schedule given in full or in part; days not given keep `current`'s.
    package static func validate(_ input: JSONValue, field: String, current: Schedule) throws(HTTPError) -> Schedule {
        guard case .object(let object) = input else { throw PreferenceField.invalid("\(field) must be an object of days", field: field) }
        var schedule = current
        for (key, value) in object {
            guard let index = dayNames.firstIndex(of: key) else {
                throw PreferenceField.invalid("\(field).\(key) is not a day of the week", field: "\(field).\(key)")
            }
            let path = "\(field).\(key)"
            guard case .object(let day) = value else { throw PreferenceField.invalid("\(path) must be an object", field: path) }
            var result = schedule.days[index]
            for (name, item) in day {
                switch name {
                case "from", "to":
                    guard case .int(let time) = item, (0...2359).contains(time), time % 100 < 60 else {
                        throw PreferenceField.invalid("\(path).\(name) must be a time HHMM from 0 to 2359", field: "\(path).\(name)")
                    }
                    if name == "from" { result.from = time } else { result.to = time }
                case "dnd":
                    guard case .bool(let flag) = item else {
                        throw PreferenceField.invalid("\(path).dnd must be true or false", field: "\(path).dnd")
                    }
                    result.dnd = flag
                default:
                    throw PreferenceField.invalid("\(path).\(name) is not a field of a day", field: "\(path).\(name)")
                }
            }
            guard result.from <= result.to else {
                throw PreferenceField.invalid("\(path).from must not be after \(path).to", field: "\(path).from")
            }
            schedule.days[index] = result
        }
        return schedule
    }

    /// Whether notifications are delivered on `weekday` (0 = Monday) at `hhmm` local time.
    package func allows(weekday: Int, hhmm: Int) -> Bool {
        let day = days[weekday]
        return !day.dnd && hhmm >= day.from && hhmm <= day.to
    }
}

/// A moment in a time zone, as the schedule needs it.
package struct LocalTime: Sendable, Equatable {
    /// 0 = Monday … 6 = Sunday.
    package let weekday: Int
    /// Hours × 100 + minutes.
    package let hhmm: Int

    package init(weekday: Int, hhmm: Int) {
        self.weekday = weekday
        self.hhmm = hhmm
    }

    /// The local weekday and time of `epochMilliseconds` in the IANA zone `identifier` (UTC if unknown).
    package init(epochMilliseconds: Int64, timeZone identifier: String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: identifier) ?? TimeZone(identifier: "UTC")!
        let date = Date(timeIntervalSince1970: Double(epochMilliseconds) / 1000)
        let components = calendar.dateComponents([.weekday, .hour, .minute], from: date)
        // Calendar: 1 = Sunday … 7 = Saturday.
        weekday = ((components.weekday ?? 2) + 5) % 7
        hhmm = (components.hour ?? 0) * 100 + (components.minute ?? 0)
    }
}
