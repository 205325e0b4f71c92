import Foundation
import Testing

/// Builds CloudEvents JSON for the ingest tests.
enum Events {
    /// A browser's PushSubscription as a `webpush` device token (SPEC §13.4): a real P-256 point
    /// and auth secret, any `endpoint`.
    static func webPushToken(_ endpoint: String) -> String {
        #"{"endpoint": "\#(endpoint)", "keys": {"p256dh": "BFFcPW6545a5BNP-yn9U_c0MwemXvzddylFa0KbDtANfRTa-OlDzGPv5pUdZAqIhUCvvDVfgjFOyzApW8X2fk1Q", "auth": "ZGVmZ2hpamtsbW5vcHFycw"}}"#
    }

    static func json(_ value: Any) -> String {
        let data = try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    static func event(_ id: String, _ type: String, _ data: [String: Any], source: String = "chat") -> [String: Any] {
        ["specversion": "1.0", "id": id, "source": source, "type": type, "data": data]
    }

    /// `receiverType` and `receiver`: one-on-one with `peer`, else group `group`.
    static func addConversation(to data: inout [String: Any], group: String?, peer: String?) {
        data["receiverType"] = peer == nil ? "group" : "user"
        data["receiver"] = peer ?? group!
    }

    /// `message.created` in group `group` (or one-on-one with `peer`).
    static func message(_ eventID: String, id: String, sender: String, group: String? = "g1", peer: String? = nil,
                        parent: String? = nil, parentSender: String? = nil, at: Int64, text: String? = nil,
                        mentions: [String] = [], mentionsAll: Bool = false) -> [String: Any] {
        var data: [String: Any] = ["id": id, "sender": sender, "sentAt": at, "mentions": mentions, "mentionsAll": mentionsAll]
        addConversation(to: &data, group: group, peer: peer)
        if let parent { data["parentId"] = parent }
        if let parentSender { data["parentSender"] = parentSender }
        if let text { data["text"] = text }
        return event(eventID, "message.created", data)
    }

    static func edit(_ eventID: String, id: String, sender: String, group: String = "g1", parent: String? = nil,
                     at: Int64, mentions: [String]?, text: String? = nil) -> [String: Any] {
        var data: [String: Any] = ["id": id, "sender": sender, "receiverType": "group", "receiver": group, "editedAt": at]
        if let parent { data["parentId"] = parent }
        if let mentions { data["mentions"] = mentions }
        if let text { data["text"] = text }
        return event(eventID, "message.edited", data)
    }

    static func delete(_ eventID: String, id: String, group: String = "g1", parent: String? = nil, at: Int64) -> [String: Any] {
        var data: [String: Any] = ["id": id, "receiverType": "group", "receiver": group, "deletedAt": at]
        if let parent { data["parentId"] = parent }
        return event(eventID, "message.deleted", data)
    }

    static func member(_ eventID: String, _ type: String, group: String = "g1", uid: String, at: Int64,
                       actor: String? = nil, scope: String? = nil) -> [String: Any] {
        var data: [String: Any] = ["guid": group, "uid": uid, "at": at]
        if let actor { data["actor"] = actor }
        if let scope { data["scope"] = scope }
        return event(eventID, type, data)
    }

    /// `reaction.added` (or `removed: true`, `reaction.removed`) of reaction `id` to `message`.
    static func reaction(_ eventID: String, id: String, message: String, reactor: String, reaction: String = "👍",
                         group: String? = "g1", peer: String? = nil, at: Int64, removed: Bool = false,
                         messageSender: String? = nil, parent: String? = nil) -> [String: Any] {
        var data: [String: Any] = ["id": id, "messageId": message, "reactor": reactor, "reaction": reaction, "at": at]
        addConversation(to: &data, group: group, peer: peer)
        if let messageSender { data["messageSender"] = messageSender }
        if let parent { data["parentId"] = parent }
        return event(eventID, removed ? "reaction.removed" : "reaction.added", data)
    }
}

extension TestApp {
    /// Posts events that must be accepted: all of them, or `accepted` of them (the rest being
    /// duplicates). Anything else — a rejected event, a 4xx — fails the calling test.
    func ingest(_ events: [Any], client: HTTPClient, contentType: String = "application/cloudevents-batch+json",
                accepted: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let response = try post(events, client: client, contentType: contentType)
        let expected = accepted ?? events.count
        #expect(response.status == 200 && response.json["accepted"] as? Int == expected
                    && response.json["rejected"] as? Int ?? 0 == 0,
                "ingest of \(events.count) events, \(expected) to be accepted: \(response.status) \(response.text)",
                sourceLocation: sourceLocation)
    }

    /// Claims up to 1,000 ready jobs with the worker key and acks them; returns them.
    func claimAll(client: HTTPClient) throws -> [[String: Any]] {
        let jobs = try client.post("/v1/jobs/claim", token: workerKey, json: #"{"max": 1000}"#).json["jobs"] as? [[String: Any]] ?? []
        let acks = jobs.map { ["id": $0["id"]!, "attempt": $0["attempt"]!] }
        if !acks.isEmpty { _ = try client.post("/v1/jobs/ack", token: workerKey, json: Events.json(["jobs": acks])) }
        return jobs
    }

    /// PATCHes `body` to `path` with the server key; anything but 200 fails the calling test.
    func patch(_ path: String, _ body: String, client: HTTPClient, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let response = try client.send("PATCH", path, token: serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
        #expect(response.status == 200, "\(path): \(response.text)", sourceLocation: sourceLocation)
    }

    /// Posts events as a batch with the ingest key; returns the response.
    func post(_ events: [Any], client: HTTPClient, contentType: String = "application/cloudevents-batch+json") throws -> HTTPResult {
        try client.post("/v1/events", token: ingestKey, json: Events.json(events), headers: ["Content-Type": contentType])
    }

    /// The subscription state of uid for a message's thread (server key), as JSON.
    func subscription(_ uid: String, _ messageID: String, client: HTTPClient) throws -> HTTPResult {
        try client.get("/v1/users/\(uid)/threads/\(messageID)/subscription", token: serverKey)
    }

    func subscribed(_ uid: String, _ messageID: String, client: HTTPClient) throws -> Bool? {
        let response = try subscription(uid, messageID, client: client)
        guard response.status == 200 else { return nil }
        return response.json["subscribed"] as? Bool
    }

    func setMembers(_ group: String, _ members: [String], client: HTTPClient) throws -> HTTPResult {
        try client.send("PUT", "/v1/groups/\(group)/members", token: serverKey, headers: ["Content-Type": "application/json"],
                        body: Array(Events.json(["members": members]).utf8))
    }
}

extension TestEnvironment {
    /// A fresh app whose group g1 has these members, joined at `joinedAt` (posted 1,000 a batch).
    func makeApp(prefix: String, members: [String], joinedAt: Int64,
                 sourceLocation: SourceLocation = #_sourceLocation) throws -> TestApp {
        let app = try makeApp(prefix: prefix)
        for start in stride(from: 0, to: members.count, by: 1000) {
            let slice = members[start..<min(members.count, start + 1000)]
            try app.ingest(slice.map { Events.member("join-\($0)", "member.joined", uid: $0, at: joinedAt) }, client: client,
                           sourceLocation: sourceLocation)
        }
        return app
    }
}

/// Now, in epoch milliseconds.
func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
