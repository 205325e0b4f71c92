import JSON

/// A device's platform (SPEC §13.1): which protocol its pushes take (SPEC §13.3–13.4). The
/// database keeps the name.
package enum Platform: String, Sendable, CaseIterable {
    case apns, fcm, webpush, webhook

    /// `apns, fcm, webpush or webhook`, for messages.
    package static let names = allCases.dropLast().map(\.rawValue).joined(separator: ", ") + " or " + allCases.last!.rawValue
}

/// A device as the API shows it (SPEC §13.1): where to push, and when it was registered.
package struct Device: Sendable, JSONWritable {
    package let target: Target
    package let createdAt: Int64
    package let updatedAt: Int64

    package init(target: Target, createdAt: Int64, updatedAt: Int64) {
        self.target = target
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    package func write(to writer: inout JSONWriter) {
        writer.object { device in
            target.writeFields(to: &device)
            device.field("createdAt", createdAt)
            device.field("updatedAt", updatedAt)
        }
    }

    /// The device as a job carries it: where to push, without the bookkeeping.
    package struct Target: Sendable, JSONWritable {
        package let id: String
        package let platform: Platform
        package let token: String
        package let topic: String?
        package let sandbox: Bool

        package init(id: String, platform: Platform, token: String, topic: String?, sandbox: Bool) {
            self.id = id
            self.platform = platform
            self.token = token
            self.topic = topic
            self.sandbox = sandbox
        }

        package func write(to writer: inout JSONWriter) {
            writer.object { writeFields(to: &$0) }
        }


        /// The targets of `recipientDevices`' text (nil: no device).
        package static func list(json: String?) throws -> [Target] {
            guard let json else { return [] }
            let values = try JSONParser.rows(Array(json.utf8), width: 5)
            return stride(from: 0, to: values.count, by: 5).compactMap { row in
                guard case .string(let id) = values[row], case .string(let name) = values[row + 1],
                      let platform = Platform(rawValue: name), case .string(let token) = values[row + 2],
                      case .bool(let sandbox) = values[row + 4] else { return nil }
                let topic: String? = if case .string(let text) = values[row + 3] { text } else { nil }
                return Target(id: id, platform: platform, token: token, topic: topic, sandbox: sandbox)
            }
        }

        package func writeFields(to device: inout JSONWriter) {
            device.field("id", id)
            device.field("platform", platform.rawValue)
            device.field("token", token)
            device.field("topic", topic)
            device.field("sandbox", sandbox)
        }
    }
}

