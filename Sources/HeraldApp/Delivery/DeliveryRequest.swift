import HeraldAPI
import HeraldDomain
import HeraldStore
import FoundationEssentials
import HTTPClient
import JSON

/// What built-in delivery sends for a job and what an answer means (SPEC §13.3). Pure: the loop
/// (`AppDeliverer`) claims, sends and records; the rules are here.
package enum DeliveryRequest {
    /// What to do with a job after its request.
    package enum Outcome: Equatable {
        /// Acknowledge it; remove these devices (the receiver or gorush refused their tokens).
        case delivered(invalidDevices: [String])
        /// Retry after `afterMs` (the receiver's `Retry-After`), else after the backoff. Direct
        /// delivery: the retry leaves out the devices `done`, and `invalidDevices` are removed now.
        case retry(afterMs: Int64?, error: String, done: [String] = [], invalidDevices: [String] = [])
        /// A permanent failure: the job is dead.
        case dead(error: String)
        /// Not sent (delivery stopped first): the job goes back to the queue as it was.
        case notSent
    }

    /// The request for a job, not signed yet (`sign` does, when it is sent); nil when there is
    /// nothing to send (gorush mode, and no device on a platform gorush serves), which
    /// acknowledges the job.
    package static func make(job: JobPayload, settings: DeliverySettings) -> OutboundRequest? {
        var body: [UInt8]
        switch settings.mode {
        case .pull, .direct:
            return nil
        case .webhook:
            var writer = JSONWriter(reservingCapacity: 1024)
            job.write(to: &writer)
            body = writer.bytes
        case .gorush:
            guard let gorush = gorushBody(job) else { return nil }
            body = gorush
        }
        var headers = ["webhook-id: \(wireJobID(job.id))"]
        // The event's trace, passed on unchanged (Herald opens no span of its own), so the
        // receiver's work joins the trace the bus started.
        if let trace = job.traceparent { headers.append("traceparent: \(trace)") }
        return OutboundRequest(url: settings.url ?? "", headers: headers, body: body, timeoutMs: settings.timeoutMs)
    }

    /// Adds `webhook-timestamp` (now: Standard Webhooks receivers refuse a timestamp more than 5
    /// minutes away from theirs, so it is the time of sending, not of the batch) and
    /// `webhook-signature`, one signature per live secret.
    package static func sign(_ request: inout OutboundRequest, jobID: Int64, secrets: [WebhookSecret], nowSeconds: Int64) {
        request.headers.append("webhook-timestamp: \(nowSeconds)")
        guard !secrets.isEmpty else { return }
        request.headers.append("webhook-signature: "
                               + WebhookSecret.header(secrets: secrets, id: wireJobID(jobID), timestamp: nowSeconds, body: request.body))
    }

    /// gorush platforms (its `POST /api/push`): 1 iOS (APNs), 2 Android (FCM).
    package static let gorushPlatforms: [Platform: Int] = [.apns: 1, .fcm: 2]

    /// The job as gorush notifications: one per platform (and, for APNs, per topic and
    /// environment) of the job's devices. Devices on other platforms (webpush, webhook) are not
    /// gorush's; nil when no device is left.
    package static func gorushBody(_ job: JobPayload) -> [UInt8]? {
        struct Key: Hashable {
            package let platform: Int
            package let topic: String?
            package let sandbox: Bool
        }
        var order: [Key] = []
        var tokens: [Key: [String]] = [:]
        for device in job.devices {
            guard let platform = gorushPlatforms[device.platform] else { continue }
            let key = platform == 1 ? Key(platform: 1, topic: device.topic, sandbox: device.sandbox)
                                    : Key(platform: platform, topic: nil, sandbox: false)
            if tokens[key] == nil { order.append(key) }
            tokens[key, default: []].append(device.token)
        }
        guard !order.isEmpty else { return nil }
        let (title, message) = job.push
        var writer = JSONWriter(reservingCapacity: 1024)
        writer.object { root in
            root.field("notifications") { list in
                list.array { list in
                    for key in order {
                        list.object { item in
                            item.field("notif_id", wireJobID(job.id))
                            item.field("tokens") { $0.array(strings: tokens[key]!) }
                            item.field("platform", key.platform)
                            let android = key.platform == 2
                            if let removal = job.removal {
                                // A silent push: the app removes these notifications (and sets the badge).
                                item.field("content_available", true)
                                if key.platform == 1 {
                                    if removal.kind == .clear { item.field("badge", job.badge) }   // a retraction knows no badge
                                    if let topic = key.topic { item.field("topic", topic) }
                                    if key.sandbox { item.field("development", true) }
                                }
                                var data: [(String, JSONValue)] = [("jobId", .string(wireJobID(job.id))), ("kind", .string(job.kind.rawValue)),
                                                                   (removal.kind == .clear ? "parentMessageId" : "messageId", .string(job.messageID)),
                                                                   ("collapseIds", .array(removal.collapseIds.map(JSONValue.string)))]
                                if removal.kind == .clear { data.append(("badge", .int(job.badge))) }
                                data.append(("traceparent", job.traceparent.map(JSONValue.string) ?? .null))
                                Self.writeGorushData(data, android: android, to: &item)
                                return
                            }
                            if let sync = job.sync {
                                // A silent push: the app brings its other screens in step (SPEC §12.3).
                                item.field("content_available", true)
                                if key.platform == 1 {
                                    if let topic = key.topic { item.field("topic", topic) }
                                    if key.sandbox { item.field("development", true) }
                                }
                                Self.writeGorushData([("jobId", .string(wireJobID(job.id))), ("kind", .string(job.kind.rawValue)),
                                                      ("change", .string(sync.change)),
                                                      ("messageId", job.messageID.isEmpty ? .null : .string(job.messageID)),
                                                      ("conversationId", sync.conversationID.map(JSONValue.string) ?? .null),
                                                      ("traceparent", job.traceparent.map(JSONValue.string) ?? .null)],
                                                     android: android, to: &item)
                                return
                            }
                            item.field("title", title)
                            item.field("message", message)
                            if key.platform == 1 {
                                item.field("badge", job.badge)
                                item.field("sound", "default")   // without it iOS shows the alert silently
                                item.field("collapse_id", job.collapseID)
                                item.field("thread-id", job.memberAction != nil ? job.collapseID : job.parentID ?? job.messageID)
                                if let topic = key.topic { item.field("topic", topic) }
                                if key.sandbox { item.field("development", true) }
                            } else {
                                // gorush sends FCM HTTP v1 messages: the collapse key, tag, sound and
                                // count are read from `android` (a top-level collapse_key is not)
                                item.field("android") { $0.object { config in
                                    config.field("collapse_key", job.collapseID)
                                    config.field("notification") { $0.object { notification in
                                        notification.field("tag", job.collapseID)
                                        notification.field("sound", "default")
                                        notification.field("notification_count", job.badge)
                                    } }
                                } }
                            }
                            // gorush's `data`: the job's data and its id.
                            var data: [(String, JSONValue)] = [
                                ("jobId", .string(wireJobID(job.id))), ("kind", .string(job.kind.rawValue)), ("messageId", .string(job.messageID)),
                                ("parentMessageId", job.parentID.map(JSONValue.string) ?? .null),
                                ("conversationId", .string(job.conversationID)), ("sender", .string(job.sender)),
                            ]
                            if let reaction = job.reaction { data += [("reactionId", .string(reaction.id)), ("reaction", .string(reaction.emoji))] }
                            if let action = job.memberAction { data += [("action", .string(action.action.rawValue)), ("uid", .string(action.uid))] }
                            if let digest = job.digest {
                                data += [("count", .int(digest.count)), ("messageIds", .array(digest.messageIDs.map(JSONValue.string))),
                                         ("senders", .array(digest.senders.map(JSONValue.string)))]
                            }
                            data.append(("traceparent", job.traceparent.map(JSONValue.string) ?? .null))
                            Self.writeGorushData(data, android: android, to: &item)
                        }
                    }
                }
            }
        }
        return writer.bytes
    }

    /// gorush's `data`, without nulls. For Android every value is a string — gorush formats
    /// each value with Go's `%s`, which turns a number into `%!s(int=3)` and a null into
    /// `%!s(<nil>)` — so numbers and arrays go as their JSON text; for iOS they stay JSON.
    package static func writeGorushData(_ pairs: [(String, JSONValue)], android: Bool, to item: inout JSONWriter) {
        item.field("data") { $0.object { data in
            for (name, value) in pairs where value != .null {
                data.field(name, android ? fcmDataValue(value) : value)
            }
        } }
    }

    /// A value of FCM's `data`, which holds strings only (gorush's Android notifications, and
    /// direct delivery's FCM messages): a string as it is, anything else as its JSON text.
    package static func fcmDataValue(_ value: JSONValue) -> JSONValue {
        if case .string = value { return value }
        var text = JSONWriter()
        text.value(value)
        return .string(text.text)
    }

    /// What an answer (or its absence) means for the job.
    package static func outcome(of response: OutboundResponse, mode: DeliverySettings.Mode, job: JobPayload, nowMs: Int64) -> Outcome {
        if let failure = response.failure {
            switch failure {
            case .notSent: return .notSent
            case .timeout: return .retry(afterMs: nil, error: "no answer within the timeout")
            case .connect(let message): return .retry(afterMs: nil, error: "connection failed: \(message)")
            case .other(let message): return .retry(afterMs: nil, error: message)
            case .refusedAddress: return .dead(error: DeliverySettings.internalAddressMessage)
            }
        }
        let status = response.status
        switch status {
        case 200...299:
            return .delivered(invalidDevices: mode == .gorush ? gorushFailedDevices(response.body, job: job)
                                                              : webhookInvalidDevices(response.body))
        case 408, 429, 500...599:
            let after = response.retryAfter.flatMap { retryAfterMs($0, nowMs: nowMs) }
            return .retry(afterMs: after, error: "HTTP \(status)")
        default:
            return .dead(error: "HTTP \(status)")
        }
    }

    /// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date; at most a day.
    package static func retryAfterMs(_ value: String, nowMs: Int64) -> Int64? {
        if let seconds = Int64(value), seconds >= 0 { return min(seconds, 86_400) * 1000 }
        guard let date = httpDateMs(value) else { return nil }
        return min(max(0, date - nowMs), 86_400_000)
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as epoch milliseconds.
    package static func httpDateMs(_ value: String) -> Int64? {
        let parts = value.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (0...23).contains(clock[0]), (0...59).contains(clock[1]),
              (0...60).contains(clock[2]) else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = Int64(era * 146_097 + dayOfEra - 719_468)
        return ((days * 24 + Int64(clock[0])) * 60 + Int64(clock[1])) * 60_000 + Int64(clock[2]) * 1000
    }

    /// A webhook receiver's `{"invalidDevices": ["<deviceId>", …]}` (other bodies: none).
    package static func webhookInvalidDevices(_ body: [UInt8]) -> [String] {
        guard !body.isEmpty, case .object(let object)? = try? JSONParser.parse(body),
              case .array(let ids)? = object["invalidDevices"] else { return [] }
        return ids.prefix(DeviceStore.maxPerUser).compactMap { id in
            guard case .string(let text) = id, Identifier.isValid(text) else { return nil }
            return text
        }
    }

    /// The errors of a `failed-push` that say the token itself is bad (APNs' reasons, FCM's
    /// codes and messages), lower-cased. Other failures (APNs or FCM down, throttled, a network
    /// error) say nothing about the device, which stays.
    package static let badTokenErrors = ["unregistered", "baddevicetoken", "devicetokennotfortopic", "notregistered", "not-registered",
                                 "invalidregistration", "invalid-registration-token", "mismatchsenderid",
                                 "requested entity was not found"]

    /// The job's devices whose tokens gorush logged as `failed-push` with a bad-token error
    /// (its answer in sync mode).
    package static func gorushFailedDevices(_ body: [UInt8], job: JobPayload) -> [String] {
        guard !body.isEmpty, case .object(let object)? = try? JSONParser.parse(body), case .array(let logs)? = object["logs"] else {
            return []
        }
        var failed: Set<String> = []
        for entry in logs {
            guard case .object(let log) = entry, case .string("failed-push")? = log["type"], case .string(let token)? = log["token"],
                  case .string(let error)? = log["error"] else { continue }
            let lowered = error.lowercased()
            if badTokenErrors.contains(where: { lowered.contains($0) }) { failed.insert(token) }
        }
        return job.devices.filter { failed.contains($0.token) && gorushPlatforms[$0.platform] != nil }.map(\.id)
    }

    /// A metrics label for an answer: its status class, `timeout` or `error`.
    package static func statusClass(_ response: OutboundResponse) -> String {
        switch response.failure {
        case .timeout?: return "timeout"
        case .some: return "error"
        case nil: return "\(response.status / 100)xx"
        }
    }
}
