import HeraldAPI
import HeraldDomain
import HeraldStore
import HTTPClient
import JSON
import Secrets

/// Direct delivery (SPEC §13.4): what Herald sends to APNs, FCM and a browser's push service for
/// one (job, device), and what each answer means for that device. Pure, like `DeliveryRequest`:
/// credentials and provider tokens come in, requests and outcomes go out.
package enum DirectRequests {
    package struct APNsCredentials {
        package let topic: String?
        package let endpoint: String
        package let sandboxEndpoint: String
    }

    package struct FCMCredentials {
        package let projectID: String
        package let endpoint: String
    }

    package struct WebPushCredentials {
        package let subject: String
        package let key: PrivateKey
    }

    /// What became of one device's push.
    package enum DeviceOutcome: Equatable {
        case sent
        /// The provider says the token is no good: the device is removed.
        case removed(reason: String)
        /// The provider token or access token expired: renew it and send again at once.
        case renewCredentials
        /// Try this device again later (after `afterMs`, else the backoff).
        case retry(afterMs: Int64?, error: String)
        /// A permanent failure for this device (the job's other devices are unaffected).
        case failed(error: String)
    }

    /// `clear`, `retract` and `sync` jobs change what a device shows without alerting.
    package static func isSilent(_ job: JobPayload) -> Bool { job.removal != nil || job.sync != nil }

    /// The job as pushed inside a provider's payload: its JSON without `notification` and
    /// `devices` (SPEC §13.4's `herald` member), written directly.
    package static func heraldJSON(_ job: JobPayload) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 1024)
        job.write(to: &writer, withDevices: false, withNotification: false)
        return writer.bytes
    }

    package static func json(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 1024)
        writer.value(value)
        return writer.bytes
    }

    // MARK: APNs

    /// `POST {endpoint}/3/device/{token}` over HTTP/2 with the provider token (SPEC §13.4).
    package static func apns(job: JobPayload, device: Device.Target, credentials: APNsCredentials, providerToken: String,
                     timeoutMs: Int) -> OutboundRequest {
        let silent = isSilent(job)
        var headers = ["authorization: bearer \(providerToken)",
                       "apns-push-type: \(silent ? "background" : "alert")",
                       "apns-priority: \(silent ? 5 : 10)"]
        if let topic = device.topic ?? credentials.topic { headers.append("apns-topic: \(topic)") }
        if !silent, job.collapseID.utf8.count <= 64, !job.collapseID.isEmpty { headers.append("apns-collapse-id: \(job.collapseID)") }
        if let trace = job.traceparent { headers.append("traceparent: \(trace)") }
        let herald = heraldJSON(job)
        func body(text: String) -> [UInt8] {
            var aps: [String: JSONValue]
            if silent {
                aps = ["content-available": 1]
            } else {
                let (title, _) = job.push
                aps = ["alert": .object(["title": .string(title), "body": .string(text)]), "badge": .int(job.badge),
                       "sound": "default", "thread-id": .string(job.parentID ?? job.conversationID)]
            }
            return Array(#"{"aps":"#.utf8) + json(.object(aps)) + Array(#","herald":"#.utf8) + herald + [UInt8(ascii: "}")]
        }
        var bytes = body(text: job.push.body)
        if bytes.count > JobPayload.maxPushBytes {
            // the body text is shortened to fit, never the JSON
            let room = job.push.body.utf8.count - (bytes.count - JobPayload.maxPushBytes)
            bytes = body(text: JobPayload.cut(job.push.body, toEscapedBytes: max(0, room)))
        }
        let base = device.sandbox ? credentials.sandboxEndpoint : credentials.endpoint
        return OutboundRequest(url: base + "/3/device/" + device.token, headers: headers, body: bytes, timeoutMs: timeoutMs, http2: true)
    }

    /// APNs' answer (SPEC §13.4): 410, or 400 BadDeviceToken, DeviceTokenNotForTopic or
    /// Unregistered, removes the device; 403 ExpiredProviderToken renews the token.
    package static func apnsOutcome(_ response: OutboundResponse, nowMs: Int64) -> DeviceOutcome {
        if let failure = transportOutcome(response) { return failure }
        let reason = errorReason(response.body, key: "reason")
        switch response.status {
        case 200: return .sent
        case 410: return .removed(reason: reason ?? "Unregistered")
        case 400 where ["BadDeviceToken", "DeviceTokenNotForTopic", "Unregistered"].contains(reason ?? ""):
            return .removed(reason: reason!)
        case 403 where reason == "ExpiredProviderToken": return .renewCredentials
        case 429, 500...599: return .retry(afterMs: retryAfter(response, nowMs: nowMs), error: "APNs \(response.status) \(reason ?? "")")
        default: return .failed(error: "APNs \(response.status) \(reason ?? "")")
        }
    }

    // MARK: FCM

    /// `POST {endpoint}/v1/projects/{projectId}/messages:send` with the access token (SPEC §13.4).
    package static func fcm(job: JobPayload, device: Device.Target, credentials: FCMCredentials, accessToken: String,
                    timeoutMs: Int) -> OutboundRequest {
        let silent = isSilent(job)
        // every data value a string, nulls left out, plus the job's id and kind
        var data: [String: JSONValue] = ["jobId": .string(wireJobID(job.id)), "kind": .string(job.kind.rawValue)]
        if case .object(let fields)? = (try? JSONParser.parse(heraldJSON(job)))?["data"] {
            for (name, value) in fields where value != .null { data[name] = DeliveryRequest.fcmDataValue(value) }
        }
        var message: [String: JSONValue] = ["token": .string(device.token), "data": .object(data)]
        if !silent {
            let (title, body) = job.push
            message["notification"] = .object(["title": .string(title), "body": .string(body)])
            message["android"] = .object(["collapse_key": .string(job.collapseID),
                                          "notification": .object(["tag": .string(job.collapseID), "notification_count": .int(job.badge)])])
            message["apns"] = .object(["headers": .object(["apns-collapse-id": .string(job.collapseID)]),
                                       "payload": .object(["aps": .object(["badge": .int(job.badge),
                                                                           "thread-id": .string(job.parentID ?? job.conversationID)])])])
        }
        var headers = ["authorization: Bearer \(accessToken)"]
        if let trace = job.traceparent { headers.append("traceparent: \(trace)") }
        return OutboundRequest(url: credentials.endpoint + "/v1/projects/" + credentials.projectID + "/messages:send", headers: headers,
                               body: json(.object(["message": .object(message)])), timeoutMs: timeoutMs)
    }

    /// The access token request of Google's JWT bearer grant (RFC 7523 §2.1): the assertion
    /// POSTed form-encoded to the service account's `token_uri`.
    package static func fcmTokenRequest(assertion: String, tokenURI: String, timeoutMs: Int) -> OutboundRequest {
        // a JWS is base64url and dots: nothing in it needs escaping in a form
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        return OutboundRequest(url: tokenURI, headers: [], body: Array(body.utf8), timeoutMs: timeoutMs,
                               contentType: "application/x-www-form-urlencoded")
    }

    /// The token endpoint's answer: the access token and its lifetime in seconds.
    package static func fcmAccessToken(_ response: OutboundResponse) -> (token: String, expiresIn: Int)? {
        guard response.failure == nil, response.status == 200, case .object(let object)? = try? JSONParser.parse(response.body),
              case .string(let token)? = object["access_token"], !token.isEmpty else { return nil }
        let expires: Int = if case .int(let seconds)? = object["expires_in"] { seconds } else { 3600 }
        return (token, expires)
    }

    /// FCM's answer (SPEC §13.4): 404, or 400 UNREGISTERED or an INVALID_ARGUMENT about the token,
    /// removes the device; 401 renews the access token.
    package static func fcmOutcome(_ response: OutboundResponse, nowMs: Int64) -> DeviceOutcome {
        if let failure = transportOutcome(response) { return failure }
        let (status, code, message) = fcmError(response.body)
        switch response.status {
        case 200: return .sent
        case 404: return .removed(reason: code ?? status ?? "NOT_FOUND")
        case 400 where code == "UNREGISTERED" || ((code == "INVALID_ARGUMENT" || status == "INVALID_ARGUMENT")
                                                  && (message ?? "").lowercased().contains("token")):
            return .removed(reason: code ?? "INVALID_ARGUMENT")
        case 401: return .renewCredentials
        case 429, 500...599: return .retry(afterMs: retryAfter(response, nowMs: nowMs), error: "FCM \(response.status) \(code ?? status ?? "")")
        default: return .failed(error: "FCM \(response.status) \(code ?? status ?? "")")
        }
    }

    /// `{"error": {"status", "message", "details": [{"errorCode"}]}}`.
    package static func fcmError(_ body: [UInt8]) -> (status: String?, code: String?, message: String?) {
        guard !body.isEmpty, case .object(let root)? = try? JSONParser.parse(body), case .object(let error)? = root["error"] else {
            return (nil, nil, nil)
        }
        var code: String?
        if case .array(let details)? = error["details"] {
            for item in details { if case .string(let value)? = item["errorCode"] { code = value } }
        }
        let status: String? = if case .string(let value)? = error["status"] { value } else { nil }
        let message: String? = if case .string(let value)? = error["message"] { value } else { nil }
        return (status, code, message)
    }

    // MARK: Web Push

    /// A `webpush` device's token as a subscription (`WebPushEncryption.subscription(token:)`).
    package static func subscription(token: String) -> (endpoint: String, keys: WebPushEncryption.Subscription)? {
        WebPushEncryption.subscription(token: token)
    }

    /// `scheme://host[:port]` of a URL: VAPID's audience.
    package static func origin(of url: String) -> String {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return url }
        let start = url.index(colon, offsetBy: 3)
        let host = url[start...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return String(url[..<start]) + host
    }

    /// The encrypted job (without `devices`) POSTed to the subscription's endpoint (SPEC §13.4);
    /// nil when the token is not a subscription or the encryption fails.
    package static func webPush(job: JobPayload, device: Device.Target, credentials: WebPushCredentials, nowSeconds: Int64,
                        timeoutMs: Int) -> OutboundRequest? {
        guard let (endpoint, keys) = subscription(token: device.token),
              let authorization = SignedToken.vapid(key: credentials.key, audience: origin(of: endpoint), subject: credentials.subject,
                                                    issuedAt: nowSeconds) else { return nil }
        return webPush(job: job, endpoint: endpoint, keys: keys, authorization: authorization, timeoutMs: timeoutMs)
    }

    /// The same for a subscription already read and a VAPID `Authorization` already made (a
    /// sender reuses one per push service for hours, as RFC 8292 allows).
    package static func webPush(job: JobPayload, endpoint: String, keys: WebPushEncryption.Subscription, authorization: String,
                        timeoutMs: Int) -> OutboundRequest? {
        var writer = JSONWriter(reservingCapacity: 1024)
        job.write(to: &writer, withDevices: false)
        guard let body = WebPushEncryption.encrypt(writer.bytes, for: keys) else { return nil }
        var headers = ["Content-Encoding: aes128gcm", "TTL: 86400", "Urgency: \(isSilent(job) ? "normal" : "high")",
                       "Authorization: \(authorization)"]
        let topic = String(Base64URL.encode(Array(job.collapseID.utf8)).prefix(32))
        if !topic.isEmpty { headers.append("Topic: \(topic)") }
        // Push services speak HTTP/2 (RFC 8030 is written for it): the pushes to one service
        // share a connection as streams, as APNs' do (ALPN falls back to HTTP/1.1 where it must).
        return OutboundRequest(url: endpoint, headers: headers, body: body, timeoutMs: timeoutMs, contentType: "application/octet-stream",
                               http2: true)
    }

    /// A push service's answer (SPEC §13.4): 201 or 200 sent; 404 and 410 remove the device.
    package static func webPushOutcome(_ response: OutboundResponse, nowMs: Int64) -> DeviceOutcome {
        if let failure = transportOutcome(response) { return failure }
        switch response.status {
        case 200, 201, 202: return .sent
        case 404, 410: return .removed(reason: "HTTP \(response.status)")
        case 429, 500...599: return .retry(afterMs: retryAfter(response, nowMs: nowMs), error: "push service \(response.status)")
        default: return .failed(error: "push service \(response.status)")
        }
    }

    // MARK: webhook devices

    /// A `webhook` device's answer (SPEC §13.4, as §13.3's webhook mode): 2xx sent; 408, 429
    /// and 5xx retry; 410 says the endpoint is gone, which removes the device; any other 4xx
    /// fails this push for good.
    package static func webhookDeviceOutcome(_ response: OutboundResponse, nowMs: Int64) -> DeviceOutcome {
        if let failure = transportOutcome(response) { return failure }
        switch response.status {
        case 200...299: return .sent
        case 410: return .removed(reason: "HTTP 410")
        case 408, 429, 500...599: return .retry(afterMs: retryAfter(response, nowMs: nowMs), error: "webhook \(response.status)")
        default: return .failed(error: "webhook \(response.status)")
        }
    }

    // MARK: shared

    /// No answer: a refused internal address is final for the device; the rest retry.
    package static func transportOutcome(_ response: OutboundResponse) -> DeviceOutcome? {
        switch response.failure {
        case nil: return nil
        case .refusedAddress?: return .removed(reason: "refused")
        case .notSent?: return .retry(afterMs: 0, error: "not sent")
        case .timeout?: return .retry(afterMs: nil, error: "no answer within the timeout")
        case .connect(let message)?: return .retry(afterMs: nil, error: "connection failed: \(message)")
        case .other(let message)?: return .retry(afterMs: nil, error: message)
        }
    }

    package static func retryAfter(_ response: OutboundResponse, nowMs: Int64) -> Int64? {
        response.retryAfter.flatMap { DeliveryRequest.retryAfterMs($0, nowMs: nowMs) }
    }

    /// A JSON answer's string member `key` (`{"reason": "BadDeviceToken"}`).
    package static func errorReason(_ body: [UInt8], key: String) -> String? {
        guard !body.isEmpty, case .string(let value)? = (try? JSONParser.parse(body))?[key] else { return nil }
        return value
    }
}
