import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import HTTPClient
import JSON
import Postgres
import Synchronization

/// Built-in delivery (SPEC §13.3, §13.4): each instance keeps one deliverer per app whose
/// `delivery` mode is `webhook`, `gorush` or `direct`, found every 2 s (or when a settings route says the settings
/// changed). Deliverers of several instances share an app's jobs through the queue's leases, so
/// each job is sent by one of them at a time.
///
/// Apps do not share the cost of waiting: a deliverer with nothing to claim sleeps until its
/// app's next retry or lease end (`JobQueue.nextDue`, at most 30 s) and is woken for its own
/// app only — by this instance's ingest, and by `NOTIFY herald_jobs` (any instance's new jobs).
/// Without the listener it looks every second, as every deliverer did before: then 150 apps
/// with failing receivers claimed 150 times a second, and every ingest woke all of them.
package final class DeliveryLoop: Sendable {
    package let database: PostgresPool
    package let metrics: Metrics
    package let logger: Logger
    /// `HERALD_DELIVERY_ALLOW_PRIVATE`: whether receivers may be at internal addresses.
    package let allowPrivateAddresses: Bool
    /// `HERALD_DELIVERY_CA_FILE`: certificate authorities trusted besides the system's.
    package let caFile: String?
    private let loop = BackgroundLoop(label: "herald.delivery")
    private let deliverers = Mutex<[String: AppDeliverer]>([:])
    /// Whether `NotificationListener` listens (set by it): only then can an idle deliverer
    /// sleep past a second, since other instances' new jobs reach it only as a NOTIFY.
    package let listening = Atomic<Bool>(false)

    package init(database: PostgresPool, metrics: Metrics, logger: Logger, allowPrivateAddresses: Bool = false, caFile: String? = nil) {
        self.database = database
        self.metrics = metrics
        self.logger = logger
        self.allowPrivateAddresses = allowPrivateAddresses
        self.caFile = caFile
    }

    /// New jobs may exist for any app (the listener connected again): every deliverer looks now.
    package func wake() {
        for deliverer in deliverers.withLock({ Array($0.values) }) { deliverer.wake() }
    }

    /// New jobs of `app` may exist: its deliverer, if it has one here, looks now.
    package func wake(app: String) {
        deliverers.withLock { $0[app] }?.wake()
    }

    /// An app's settings changed: read them now.
    package func refresh() { loop.wake() }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "delivery" }
    /// The deliverers finish their requests in flight (up to 60 s each, together).
    package var shutdownTimeoutSeconds: Double? { 90 }

    /// Keeps a deliverer per delivering app until `shutdown()`, then stops them together. Reading
    /// the apps that deliver may fail while the database is away: logged, and read again in 2 s.
    package func run() {
        loop.run(pass: { [self] in
            do {
                try reconcile()
            } catch {
                logger.warn("delivery: reading the apps that deliver failed", ["error": .string(String(describing: error))])
            }
            return .idle(seconds: 2)
        }, drain: { [self] in
            Self.stopAll(deliverers.withLock { state in defer { state.removeAll() }; return Array(state.values) })
        })
    }

    /// Stops deliverers together (each finishes its requests in flight and gives back what it
    /// did not send), not one after another: every one is asked first, then each is waited for
    /// (a task per deliverer on Dispatch's global queue stopped them two at a time on two cores,
    /// each waiting out its batch's sends).
    package static func stopAll(_ deliverers: [AppDeliverer]) {
        BackgroundLoop.stopTogether(deliverers.map(\.loop), timeout: 60)
    }

    /// Asks `run()` to stop the deliverers and return.
    package func shutdown() { loop.shutdown() }

    /// Starts a deliverer for each app that delivers, passes it its settings, and stops those
    /// of apps that no longer do.
    private func reconcile() throws {
        let rows = try database.withConnection { connection in
            try connection.query("""
                SELECT app, (settings->'delivery')::text AS delivery FROM app_settings
                 WHERE settings->'delivery'->>'mode' IN ('webhook', 'gorush', 'direct')
                """)
        }
        var wanted: [String: DeliverySettings] = [:]
        for row in rows {
            var settings = DeliverySettings()
            guard let text = try row.decode("delivery", as: String?.self), let json = try? JSONParser.parse(Array(text.utf8)),
                  (try? settings.apply(patch: json, field: "delivery", stored: true)) != nil, settings.mode != .pull else { continue }
            wanted[try row.decode("app")] = settings
        }
        var stopped: [AppDeliverer] = []
        var started: [AppDeliverer] = []
        deliverers.withLock { current in
            for (app, deliverer) in current where wanted[app] == nil {
                stopped.append(deliverer)
                current[app] = nil
            }
            for (app, settings) in wanted {
                if let deliverer = current[app] {
                    deliverer.update(settings)
                } else {
                    let deliverer = AppDeliverer(app: app, settings: settings, database: database, metrics: metrics, logger: logger,
                                                 allowPrivateAddresses: allowPrivateAddresses, caFile: caFile,
                                                 listening: { [weak self] in self?.listening.load(ordering: .relaxed) ?? false })
                    current[app] = deliverer
                    started.append(deliverer)
                }
            }
        }
        Self.stopAll(stopped)
        for deliverer in started { deliverer.start() }
    }
}

/// Delivers one app's jobs in batches, in a pipeline: while this loop sends batch N
/// (`concurrency` requests at a time, in job order), a database lane of its own records the
/// outcomes of batch N-1 in one transaction — acknowledged, retried after the receiver's
/// `Retry-After` or the backoff, or dead — and claims batch N+1. When delivery stops, a batch
/// claimed but not sent is given back to the queue as it was.
package final class AppDeliverer: Sendable {
    package let app: String
    package let database: PostgresPool
    package let metrics: Metrics
    package let logger: Logger
    private let settings: Mutex<DeliverySettings>
    fileprivate let loop: BackgroundLoop
    private let client: HTTPClient
    /// Direct delivery's keys and tokens (SPEC §13.4).
    private let direct = DirectSender()
    /// Claims and records, one at a time, beside the sending loop.
    private let lane = DispatchQueue(label: "herald.delivery.database")
    /// The batch claimed while the previous one was being sent.
    private let prefetched = Mutex<Batch?>(nil)

    /// Claimed jobs and what to send them with: the settings they were claimed under (their
    /// lease was computed from them), whatever changes meanwhile.
    package struct Batch: Sendable {
        package let jobs: [JobPayload]
        package let secrets: [WebhookSecret]
        package let settings: DeliverySettings
        /// Direct delivery's keys (none in the other modes).
        package var credentials: [DeliveryCredentials.Stored] = []
    }

    /// Jobs per claim: enough to keep `concurrency` requests busy between two claims (32 rounds),
    /// and few enough that the lease fits in the queue's longest (an hour) with slow timeouts.
    package static func batchSize(_ settings: DeliverySettings) -> Int {
        let rounds = min(32, max(1, (3570 * 1000) / (2 * settings.timeoutMs)))
        return min(1000, settings.concurrency * rounds)
    }

    /// The lease covers, at the worst (every request times out), waiting for the batch before
    /// and sending this one.
    package static func leaseSeconds(_ settings: DeliverySettings) -> Int {
        let rounds = (batchSize(settings) + settings.concurrency - 1) / settings.concurrency
        return min(3600, (2 * rounds * settings.timeoutMs + 999) / 1000 + 30)
    }

    /// After a batch shorter than a claim, the next look: the queue was empty a moment ago.
    package static let idleSeconds = 1.0
    /// The longest sleep of a deliverer with nothing due (new jobs wake it sooner).
    package static let longestIdleSeconds = 30.0
    /// Whether the notification listener listens (DeliveryLoop.listening).
    private let listening: @Sendable () -> Bool

    /// How long to sleep after a claim found nothing: until the app's next job is due (a retry,
    /// a lease's end), at most 30 s, when new jobs wake this deliverer; a second when they
    /// cannot (no listener), as before.
    package func idle(nextDue: Double?) -> Double {
        guard listening() else { return Self.idleSeconds }
        return min(max(nextDue ?? Self.longestIdleSeconds, 0.001), Self.longestIdleSeconds)
    }

    package init(app: String, settings: DeliverySettings, database: PostgresPool, metrics: Metrics, logger: Logger,
         allowPrivateAddresses: Bool, caFile: String?, listening: @escaping @Sendable () -> Bool = { false }) {
        self.app = app
        self.listening = listening
        client = HTTPClient(userAgent: "Herald", allowInternalAddresses: allowPrivateAddresses, caFile: caFile)
        self.database = database
        self.metrics = metrics
        self.logger = logger
        self.settings = Mutex(settings)
        loop = BackgroundLoop(label: "herald.delivery.app")
    }

    package func update(_ next: DeliverySettings) { settings.withLock { $0 = next } }
    package func wake() { loop.wake() }

    package func start() {
        let ownThread = loop.start(pass: { [self] in pass() }, drain: { [self] in
            lane.sync {}   // the last outcomes are recorded
            guard let batch = prefetched.withLock({ state in defer { state = nil }; return state }) else { return }
            do {
                try database.withConnection { try JobQueue.release(app: app, batch.jobs.map { ($0.id, $0.attempt) }, on: $0) }
            } catch {
                logger.warn("delivery: giving back unsent jobs failed (their leases will expire)", ["error": .string(String(describing: error))])
            }
        })
        if !ownThread {
            logger.warn("delivery: no thread could be made for an app's deliverer (the process's thread limit); it shares Dispatch's pool",
                        ["app": .string(app)])
        }
    }

    package func stop() { loop.stop(timeout: 60) }

    /// Claims a batch; with none, when the app's next job comes due (seconds; nil: none will).
    private func claim(_ settings: DeliverySettings) throws -> (batch: Batch?, nextDue: Double?) {
        let claimed = try database.withTransaction { connection -> (batch: Batch?, nextDue: Double?) in
            let jobs = try JobQueue.claim(app: app, max: Self.batchSize(settings), leaseSeconds: Self.leaseSeconds(settings), on: connection)
            guard !jobs.isEmpty else { return (nil, try JobQueue.nextDue(apps: [app], on: connection)) }
            return (Batch(jobs: jobs, secrets: try DeliverySecretStore().live(app: app, on: connection), settings: settings,
                          credentials: settings.mode == .direct ? try DeliveryCredentials.load(app: app, on: connection) : []), nil)
        }
        metrics.add(.deliveryClaims, 1)
        metrics.add(.jobsClaimed, claimed.batch?.jobs.count ?? 0)
        return claimed
    }

    private func pass() -> BackgroundLoop.Next {
        let current = settings.withLock { $0 }
        let batch: Batch
        do {
            if let next = prefetched.withLock({ state in defer { state = nil }; return state }) {
                batch = next
            } else {
                let claimed = try claim(current)
                guard let next = claimed.batch else { return .idle(seconds: idle(nextDue: claimed.nextDue)) }
                batch = next
            }
        } catch {
            logger.warn("delivery: a claim failed", ["error": .string(String(describing: error))])
            return .idle(seconds: 1)
        }
        // The next batch is claimed while this one is sent (unless this one was short: then
        // the queue is empty for now), with the settings in force now.
        let settings = batch.settings
        let full = batch.jobs.count == Self.batchSize(settings)
        let next = LaneResult()
        if full {
            lane.async { [self] in
                do { next.finish(try claim(current).batch) } catch {
                    logger.warn("delivery: a claim failed", ["error": .string(String(describing: error))])
                    next.finish(nil)
                }
            }
        }
        let outcomes = send(batch, settings: settings)
        lane.async { [self] in
            do { try record(batch.jobs, outcomes) } catch {
                logger.warn("delivery: recording outcomes failed (the jobs will be sent again when their leases expire)",
                            ["error": .string(String(describing: error))])
            }
        }
        guard full else { return .idle(seconds: Self.idleSeconds) }
        guard let claimed = next.wait() else { return .idle(seconds: Self.idleSeconds) }
        prefetched.withLock { $0 = claimed }
        return .again
    }

    /// Sends a batch; the outcome of each job, in the batch's order.
    private func send(_ batch: Batch, settings: DeliverySettings) -> [DeliveryRequest.Outcome] {
        if settings.mode == .direct {
            direct.use(batch.credentials)
            return direct.send(batch.jobs, context: .init(settings: settings, secrets: batch.secrets, client: client, metrics: metrics,
                                                          shouldStart: { [loop] in !loop.isStopping }))
        }
        var requests: [OutboundRequest] = []
        var sent: [Int] = []   // the job each request is for
        var outcomes = [DeliveryRequest.Outcome](repeating: .delivered(invalidDevices: []), count: batch.jobs.count)
        for (index, job) in batch.jobs.enumerated() {
            // nil: nothing to send (no device gorush serves), which acknowledges the job
            if let request = DeliveryRequest.make(job: job, settings: settings) {
                requests.append(request)
                sent.append(index)
            }
        }
        let responses = client.perform(requests, concurrency: settings.concurrency, shouldStart: { [loop] in !loop.isStopping },
                                       prepare: { position, request in
            DeliveryRequest.sign(&request, jobID: batch.jobs[sent[position]].id, secrets: batch.secrets,
                                 nowSeconds: currentTimeMilliseconds() / 1000)
        }, progress: { event in
            switch event {
            case .started: metrics.deliveryStarted()
            case .finished(_, let response): metrics.deliveryFinished(platform: "", seconds: response.seconds)
            }
        })
        let finished = currentTimeMilliseconds()
        for (position, response) in responses.enumerated() {
            let index = sent[position]
            let outcome = DeliveryRequest.outcome(of: response, mode: settings.mode, job: batch.jobs[index], nowMs: finished)
            outcomes[index] = outcome
            if outcome != .notSent {
                metrics.deliveryAttempt(outcome: outcome, status: DeliveryRequest.statusClass(response))
            }
        }
        return outcomes
    }

    /// Records a batch's outcomes in one transaction.
    private func record(_ jobs: [JobPayload], _ outcomes: [DeliveryRequest.Outcome]) throws {
        var acks: [JobQueue.Ack] = []
        var failures: [JobQueue.Failure] = []
        var unsent: [(id: Int64, attempt: Int)] = []
        var removed: [(uid: String, id: String)] = []
        for (job, outcome) in zip(jobs, outcomes) {
            switch outcome {
            case .delivered(let invalid): acks.append(JobQueue.Ack(id: job.id, attempt: job.attempt, invalidDevices: invalid))
            case .retry(let after, let error, let done, let invalid):
                failures.append(JobQueue.Failure(id: job.id, attempt: job.attempt, error: error, retryable: true, retryAfterMs: after,
                                                 doneDevices: done))
                removed += invalid.map { (job.recipient, $0) }
            case .dead(let error):
                failures.append(JobQueue.Failure(id: job.id, attempt: job.attempt, error: error, retryable: false, retryAfterMs: nil))
            case .notSent: unsent.append((job.id, job.attempt))
            }
        }
        let (acked, states) = try database.withTransaction { connection in
            let acked = try JobQueue.ack(app: app, acks, on: connection)
            let states = try JobQueue.fail(app: app, failures, on: connection)
            // the devices a provider refused, of jobs retried for their other devices
            try DeviceStore().remove(app: app, pairs: removed, on: connection)
            try JobQueue.release(app: app, unsent, on: connection)
            return (acked, states)
        }
        let dead = states.values.filter { $0 == .dead }.count
        metrics.add(.jobsAcked, acked.count)
        metrics.add(.jobsRetried, states.count - dead)
        metrics.add(.jobsDead, dead)
        if dead > 0 { logger.warn("delivery: jobs dead", ["count": .int(dead)]) }
    }
}

/// The claim the lane makes for the next pass, waited for by the sending loop.
private final class LaneResult: Sendable {
    private let value = Mutex<AppDeliverer.Batch?>(nil)
    private let done = DispatchSemaphore(value: 0)

    package func finish(_ batch: AppDeliverer.Batch?) {
        value.withLock { $0 = batch }
        done.signal()
    }

    package func wait() -> AppDeliverer.Batch? {
        done.wait()
        return value.withLock { $0 }
    }
}
