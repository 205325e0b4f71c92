import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import HTTPClient
import JSON
import Secrets
import Synchronization

/// Direct delivery of one app's jobs (SPEC §13.4): each claimed job is sent to each of its
/// devices through its platform's provider — APNs over HTTP/2, FCM HTTP v1, Web Push, or the
/// device's own webhook — and the devices' outcomes make the job's: acknowledged when every
/// device has a final one (sent, removed, failed for good, or no credentials for its platform),
/// else retried later for the devices still without one.
///
/// It keeps the app's keys, parsed once per stored key, and the tokens made with them: the APNs
/// provider token (reused 50 minutes, within Apple's 20–55; renewed at once on
/// `ExpiredProviderToken`) and the FCM access token (kept until 5 minutes before it expires;
/// renewed on a 401). One deliverer's loop calls it, one batch at a time.
package final class DirectSender: Sendable {
    /// How long a provider token is reused.
    package static let providerTokenReuseMs: Int64 = 50 * 60 * 1000
    /// How long before its expiry an access token is replaced.
    package static let accessTokenMarginMs: Int64 = 5 * 60 * 1000

    private struct Cache {
        package var stamps: [CredentialKind: Int64] = [:]
        package var keys: [CredentialKind: PrivateKey] = [:]
        package var providerToken: (value: String, issuedAtMs: Int64)?
        package var accessToken: (value: String, expiresAtMs: Int64)?
        /// VAPID `Authorization` headers by audience (a push service's origin), with their expiry.
        package var vapid: [String: (header: String, expiresAtMs: Int64)] = [:]
    }

    /// A VAPID token is made for 12 hours and replaced an hour before it ends.
    package static let vapidMarginMs: Int64 = 3600 * 1000
    /// Push services remembered at most (browsers use a handful; a bound all the same).
    package static let vapidAudiences = 10_000

    private let cache = Mutex(Cache())

    /// One (job, device) to send.
    private struct Target: Sendable {
        package let job: Int
        package let device: Device.Target
    }

    /// What a batch's sending needs besides its jobs.
    package struct Context {
        package let settings: DeliverySettings
        package let secrets: [WebhookSecret]
        package let client: HTTPClient
        package let metrics: Metrics
        package let shouldStart: () -> Bool
    }

    /// Takes the app's stored keys: a key stored anew is parsed, and the tokens made with the
    /// key it replaces are dropped.
    package func use(_ stored: [DeliveryCredentials.Stored]) {
        cache.withLock { cache in
            let kinds = Set(stored.map(\.kind))
            for kind in cache.stamps.keys where !kinds.contains(kind) { forget(kind, in: &cache) }
            for credential in stored where cache.stamps[credential.kind] != credential.storedAt {
                forget(credential.kind, in: &cache)
                cache.stamps[credential.kind] = credential.storedAt
                cache.keys[credential.kind] = PrivateKey.pem(credential.pem)
            }
        }
    }

    private func forget(_ kind: CredentialKind, in cache: inout Cache) {
        cache.stamps[kind] = nil
        cache.keys[kind] = nil
        if kind == .apns { cache.providerToken = nil }
        if kind == .fcm { cache.accessToken = nil }
        if kind == .vapid { cache.vapid = [:] }
    }

    /// Sends a batch; the outcome of each job, in the batch's order.
    package func send(_ jobs: [JobPayload], context: Context) -> [DeliveryRequest.Outcome] {
        var targets: [Target] = []
        for (index, job) in jobs.enumerated() {
            for device in job.devices { targets.append(Target(job: index, device: device)) }
        }
        var results = [DirectRequests.DeviceOutcome?](repeating: nil, count: targets.count)
        var pending = Array(targets.indices)
        // A second round for the devices whose provider refused an expired token, with a new one.
        for round in 0..<2 where !pending.isEmpty {
            let outcomes = sendRound(pending.map { targets[$0] }, jobs: jobs, context: context, renewed: round > 0)
            var again: [Int] = []
            for (position, outcome) in zip(pending, outcomes) {
                if outcome == .renewCredentials, round == 0 {
                    again.append(position)
                } else if outcome == .renewCredentials {
                    results[position] = .retry(afterMs: nil, error: "the provider refused a renewed token")
                } else {
                    results[position] = outcome
                }
            }
            pending = again
        }
        var byJob = [[(device: String, outcome: DirectRequests.DeviceOutcome)]](repeating: [], count: jobs.count)
        for (target, outcome) in zip(targets, results) {
            byJob[target.job].append((target.device.id, outcome ?? Self.unsent))
        }
        return byJob.map(Self.jobOutcome)
    }

    /// A job's outcome from its devices': retried (for the devices without a final outcome) when
    /// one of them is to be retried, else acknowledged; either way the removed devices go.
    package static func jobOutcome(_ devices: [(device: String, outcome: DirectRequests.DeviceOutcome)]) -> DeliveryRequest.Outcome {
        var removed: [String] = [], done: [String] = [], errors: [String] = [], afters: [Int64] = []
        var unsent = 0
        for (device, outcome) in devices {
            switch outcome {
            case .sent, .failed: done.append(device)
            case .removed: removed.append(device); done.append(device)
            case .retry(let after, let error):
                if outcome == Self.unsent { unsent += 1 }
                errors.append(error)
                if let after { afters.append(after) }
            case .renewCredentials: errors.append("renew")
            }
        }
        guard !errors.isEmpty else { return .delivered(invalidDevices: removed) }
        // nothing was sent at all (delivery stopped first): the job goes back as it was
        if unsent == devices.count { return .notSent }
        return .retry(afterMs: afters.max(), error: errors.first { $0 != Self.unsentError } ?? errors[0], done: done, invalidDevices: removed)
    }

    package static let unsentError = "not sent"
    /// A device whose request was not started (delivery stopped first).
    package static let unsent = DirectRequests.DeviceOutcome.retry(afterMs: 0, error: unsentError)

    /// Builds and sends one round's requests; each target's outcome, in order.
    private func sendRound(_ targets: [Target], jobs: [JobPayload], context: Context, renewed: Bool) -> [DirectRequests.DeviceOutcome] {
        let settings = context.settings
        let now = currentTimeMilliseconds()
        if renewed {
            cache.withLock { cache in
                if targets.contains(where: { $0.device.platform == .apns }) { cache.providerToken = nil }
                if targets.contains(where: { $0.device.platform == .fcm }) { cache.accessToken = nil }
            }
        }
        let providerToken = targets.contains { $0.device.platform == .apns } ? self.providerToken(settings, now: now) : nil
        let accessToken: (token: String?, error: String?) = targets.contains(where: { $0.device.platform == .fcm }) && settings.fcm != nil
            ? self.accessToken(settings, context: context, now: now) : (nil, nil)
        let vapid = cache.withLock { $0.keys[.vapid] }

        /// What a target became: its request, or an outcome without one (and its metrics label).
        enum Built: Sendable {
            case request(OutboundRequest)
            case outcome(DirectRequests.DeviceOutcome, label: String)
        }
        @Sendable func build(_ target: Target) -> Built {
            let job = jobs[target.job], device = target.device
            var request: OutboundRequest?
            switch device.platform {
            case .apns:
                if let apns = settings.apns, let token = providerToken {
                    request = DirectRequests.apns(job: job, device: device,
                                                  credentials: .init(topic: apns.topic, endpoint: apns.endpoint,
                                                                     sandboxEndpoint: apns.sandboxEndpoint),
                                                  providerToken: token, timeoutMs: settings.timeoutMs)
                }
            case .fcm:
                if let fcm = settings.fcm, accessToken.error == nil, let token = accessToken.token {
                    request = DirectRequests.fcm(job: job, device: device, credentials: .init(projectID: fcm.projectID, endpoint: fcm.endpoint),
                                                 accessToken: token, timeoutMs: settings.timeoutMs)
                } else if let error = accessToken.error {
                    return .outcome(.retry(afterMs: nil, error: error), label: "retry")
                }
            case .webpush:
                if let webpush = settings.webpush, let vapid {
                    guard let (endpoint, keys) = DirectRequests.subscription(token: device.token), endpoint.lowercased().hasPrefix("https://") else {
                        return .outcome(.removed(reason: "refused"), label: "refused")
                    }
                    guard let authorization = vapidHeader(audience: DirectRequests.origin(of: endpoint), subject: webpush.subject, key: vapid,
                                                          now: now),
                          let encrypted = DirectRequests.webPush(job: job, endpoint: endpoint, keys: keys, authorization: authorization,
                                                                 timeoutMs: settings.timeoutMs) else {
                        return .outcome(.failed(error: "the payload could not be encrypted for this subscription"), label: "failed")
                    }
                    request = encrypted
                }
            case .webhook:
                guard device.token.lowercased().hasPrefix("https://"), DeliverySettings.isValidURL(device.token) else {
                    return .outcome(.removed(reason: "refused"), label: "refused")
                }
                var writer = JSONWriter(reservingCapacity: 1024)
                job.write(to: &writer)
                var headers = ["webhook-id: \(wireJobID(job.id))"]
                if let trace = job.traceparent { headers.append("traceparent: \(trace)") }
                request = OutboundRequest(url: device.token, headers: headers, body: writer.bytes, timeoutMs: settings.timeoutMs)
            }
            // SPEC §13.4: a platform without its block (or key) is skipped, and counted
            return request.map(Built.request) ?? .outcome(.failed(error: "no credentials"), label: "no_credentials")
        }
        // Building is pure work (JSON, and for Web Push an ECDH and AES per message): spread over
        // the cores in slices, each slice's results kept apart and joined in order.
        let sliceSize = 64
        let slices = (targets.count + sliceSize - 1) / sliceSize
        let built = Mutex([[Built]](repeating: [], count: slices))
        DispatchQueue.concurrentPerform(iterations: slices) { slice in
            let range = slice * sliceSize..<min(targets.count, (slice + 1) * sliceSize)
            let part = range.map { build(targets[$0]) }
            built.withLock { $0[slice] = part }
        }
        var outcomes = [DirectRequests.DeviceOutcome?](repeating: nil, count: targets.count)
        var requests: [OutboundRequest] = []
        var sent: [Int] = []   // the target each request is for
        for (index, item) in built.withLock({ $0.joined() }).enumerated() {
            switch item {
            case .request(let request):
                requests.append(request)
                sent.append(index)
            case .outcome(let outcome, let label):
                outcomes[index] = outcome
                context.metrics.deliveryAttempt(platform: targets[index].device.platform.rawValue, outcome: label,
                                                status: label == "retry" ? "error" : "none")
            }
        }

        let responses = context.client.perform(requests, concurrency: settings.concurrency, shouldStart: context.shouldStart,
                                               prepare: { position, request in
            let target = targets[sent[position]]
            guard target.device.platform == .webhook else { return }
            DeliveryRequest.sign(&request, jobID: jobs[target.job].id, secrets: context.secrets,
                                 nowSeconds: currentTimeMilliseconds() / 1000)
        }, progress: { event in
            switch event {
            case .started: context.metrics.deliveryStarted()
            case .finished(let position, let response):
                context.metrics.deliveryFinished(platform: targets[sent[position]].device.platform.rawValue, seconds: response.seconds)
            }
        })
        let finished = currentTimeMilliseconds()
        for (position, response) in responses.enumerated() {
            let index = sent[position]
            let platform = targets[index].device.platform
            var outcome: DirectRequests.DeviceOutcome = switch platform {
            case .apns: DirectRequests.apnsOutcome(response, nowMs: finished)
            case .fcm: DirectRequests.fcmOutcome(response, nowMs: finished)
            case .webpush: DirectRequests.webPushOutcome(response, nowMs: finished)
            case .webhook: DirectRequests.webhookDeviceOutcome(response, nowMs: finished)
            }
            // A provider endpoint of the settings that now resolves to an internal address says
            // nothing about the device: it stays, and this push fails.
            if response.failure == .refusedAddress, platform == .apns || platform == .fcm {
                outcome = .failed(error: DeliverySettings.internalAddressMessage)
            }
            outcomes[index] = outcome
            if response.failure != .notSent {
                let label = response.failure == .refusedAddress ? "refused" : Self.label(outcome)
                context.metrics.deliveryAttempt(platform: platform.rawValue, outcome: label, status: DeliveryRequest.statusClass(response))
            }
        }
        return outcomes.map { $0 ?? Self.unsent }
    }

    /// The metrics label of a device's outcome.
    package static func label(_ outcome: DirectRequests.DeviceOutcome) -> String {
        switch outcome {
        case .sent: "sent"
        case .removed: "removed"
        case .renewCredentials: "renew"
        case .retry: "retry"
        case .failed: "failed"
        }
    }

    /// The VAPID `Authorization` for a push service: the cached one until an hour before it
    /// expires, else a new one (RFC 8292 §2: a token may be reused while valid).
    private func vapidHeader(audience: String, subject: String, key: PrivateKey, now: Int64) -> String? {
        if let cached = cache.withLock({ $0.vapid[audience] }), now < cached.expiresAtMs - Self.vapidMarginMs { return cached.header }
        guard let header = SignedToken.vapid(key: key, audience: audience, subject: subject, issuedAt: now / 1000) else { return nil }
        cache.withLock { cache in
            if cache.vapid.count >= Self.vapidAudiences { cache.vapid = [:] }
            cache.vapid[audience] = (header, now + SignedToken.vapidLifetimeSeconds * 1000)
        }
        return header
    }

    /// The APNs provider token: the cached one while it is younger than the reuse time, else a
    /// new one. Nil without the block or its key.
    private func providerToken(_ settings: DeliverySettings, now: Int64) -> String? {
        guard let apns = settings.apns else { return nil }
        return cache.withLock { cache in
            if let token = cache.providerToken, now - token.issuedAtMs < Self.providerTokenReuseMs { return token.value }
            guard let key = cache.keys[.apns],
                  let token = SignedToken.apns(key: key, keyID: apns.keyID, teamID: apns.teamID, issuedAt: now / 1000) else { return nil }
            cache.providerToken = (token, now)
            return token
        }
    }

    /// The FCM access token: the cached one until 5 minutes before it expires, else a new one
    /// from the token endpoint (RFC 7523's JWT bearer grant). `error` when the endpoint did not
    /// give one (the FCM devices are retried later); neither without the key.
    private func accessToken(_ settings: DeliverySettings, context: Context, now: Int64) -> (token: String?, error: String?) {
        guard let fcm = settings.fcm else { return (nil, nil) }
        let (cached, key) = cache.withLock { cache -> (String?, PrivateKey?) in
            if let token = cache.accessToken, now < token.expiresAtMs - Self.accessTokenMarginMs { return (token.value, nil) }
            return (nil, cache.keys[.fcm])
        }
        if let cached { return (cached, nil) }
        guard let key, let assertion = SignedToken.fcmAssertion(key: key, clientEmail: fcm.clientEmail, tokenURI: fcm.tokenURI,
                                                                 issuedAt: now / 1000) else { return (nil, nil) }
        let response = context.client.perform([DirectRequests.fcmTokenRequest(assertion: assertion, tokenURI: fcm.tokenURI,
                                                                              timeoutMs: context.settings.timeoutMs)], concurrency: 1)[0]
        guard let granted = DirectRequests.fcmAccessToken(response) else {
            let why = response.failure.map { "\($0)" } ?? "HTTP \(response.status)"
            return (nil, "FCM's token endpoint gave no access token (\(why))")
        }
        cache.withLock { $0.accessToken = (granted.token, now + Int64(granted.expiresIn) * 1000) }
        return (granted.token, nil)
    }
}
