import HeraldDomain
import Dispatch
import Glibc
import JSON
import Postgres
import Synchronization

/// SPEC §17's windows as one routing pass sees them: which recipients' digestible replies are
/// held, and the windows the pass opens (`sql/0028_thread_digests.sql`). A held reply writes
/// nothing; a window is one row, written with the job of the reply that opens it.
package struct DigestWindows {
    package struct Opening {
        package let thread: String
        package let uid: String
        package let at: Int64
        package let endsAt: Int64
        package let message: String
    }

    package let maxAgeMs: Int64
    /// Each (thread, recipient)'s latest window, as stored or as opened by this pass.
    private var windows: [String: (opened: Int64, ends: Int64)] = [:]
    package private(set) var openings: [Opening] = []

    package init(settings: AppSettings) {
        maxAgeMs = Int64(settings.maxEventAgeSeconds) * 1000
    }

    /// Whether the digestible reply `message`, routed at Herald's time `at` for `recipient`, is
    /// held: a window of theirs in the thread is open at `at` (`stored`: the latest stored one as
    /// "<opened> <ends>"). When none is, the reply's job is produced and it opens one for
    /// `seconds`. A window opened after `at` (a large group's chunks of two replies done out of
    /// order) does not hold it: the window's end would not count it.
    package mutating func holds(thread: String, recipient: String, message: String, at: Int64, stored: String?,
                        seconds: Int) -> Bool {
        let key = thread + "\u{1F}" + recipient
        if let window = windows[key] ?? Self.parse(stored), window.opened <= at, at < window.ends { return true }
        let end = at + Int64(seconds) * 1000
        windows[key] = (at, end)
        openings.append(Opening(thread: thread, uid: recipient, at: at, endsAt: end, message: message))
        return false
    }

    package static func parse(_ text: String?) -> (opened: Int64, ends: Int64)? {
        guard let parts = text?.split(separator: " "), parts.count == 2, let opened = Int64(parts[0]), let ends = Int64(parts[1]) else {
            return nil
        }
        return (opened, ends)
    }

    /// Writes the windows this pass opened, in the transaction of their jobs (a large-group chunk
    /// done again after a crash finds its own windows there and adds nothing).
    package func open(app: String, on connection: PostgresConnection) throws {
        guard !openings.isEmpty else { return }
        try connection.send("""
            INSERT INTO digest_windows (app, thread_id, uid, opened_at, ends_at, opened_by, max_age_ms)
            SELECT \(app), x.thread, x.uid, x.at, x.ends_at, x.message, \(maxAgeMs)
              FROM unnest(\(openings.map(\.thread))::text[], \(openings.map(\.uid))::text[], \(openings.map(\.at))::bigint[], \(openings.map(\.endsAt))::bigint[], \(openings.map(\.message))::text[]) AS x(thread, uid, at, ends_at, message)
            ON CONFLICT DO NOTHING
            """)
    }
}

/// Acts on the digest windows that ended (SPEC §17), on every instance, each window exactly
/// once: a pass locks the due windows it takes (`FOR UPDATE SKIP LOCKED`), decides, writes the
/// digest jobs and marks the windows closed in one transaction — a crash anywhere before its
/// commit leaves them to the next pass, here or on another instance.
package final class DigestCloser: Sendable {
    package let database: PostgresPool
    package let logger: Logger
    /// How often an idle instance looks for windows that ended (SPEC §17: acted on within 2 s).
    package let intervalSeconds: Double
    /// Test hook (`HERALD_TEST_DIGEST_PAUSE_MS`): a pause after deciding, before writing, for a
    /// test that kills Herald there.
    package let pauseAfterDecidingMs: Int
    private let loop = BackgroundLoop(label: "herald.digests", qos: .userInitiated, firstWait: .again)
    package static let batch = 1000

    package init(database: PostgresPool, logger: Logger, intervalSeconds: Double = 0.5, pauseAfterDecidingMs: Int = 0) {
        self.database = database
        self.logger = logger
        self.intervalSeconds = intervalSeconds
        self.pauseAfterDecidingMs = pauseAfterDecidingMs
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "digests" }
    package var shutdownTimeoutSeconds: Double? { 10 }

    /// Closes windows until `shutdown()`; a pass that fails is logged and tried again a second later.
    package func run() {
        loop.run { [self] in
            do {
                return try runOnce() == Self.batch ? .again : .idle(seconds: intervalSeconds)
            } catch {
                logger.warn("digest windows failed", ["error": .string(String(describing: error))])
                return .rest(seconds: 1)
            }
        }
    }

    /// Asks `run()` to return after the pass in progress.
    package func shutdown() { loop.shutdown() }

    /// One pass over the apps with windows that ended, up to `batch` windows each; returns how
    /// many it closed. App by app, each in a transaction of its own (on Citus, on the worker
    /// that holds the app).
    @discardableResult
    package func runOnce() throws -> Int {
        let apps = try database.withConnection { connection in
            try connection.query("""
                SELECT DISTINCT app FROM digest_windows WHERE closed_at IS NULL AND ends_at <= herald_now_ms()
                """).map { try $0.decode(0, as: String.self) }
        }
        return try apps.reduce(0) { $0 + (try runOnce(app: $1)) }
    }

    /// Closes up to `batch` windows of `app` that ended; returns how many. Three statements
    /// for the whole batch: the windows (locked), the replies each held (one pass over each
    /// thread's replies, `herald_digest_held_windows`), and the routing inputs of the windows
    /// whose digest is decided on.
    private func runOnce(app: String) throws -> Int {
        try database.withTransaction { connection in
            let due = try connection.query("""
                WITH due AS (
                    SELECT w.app, w.thread_id, w.uid, w.opened_at, w.ends_at, w.opened_by, w.max_age_ms
                      FROM digest_windows w
                     WHERE w.app = \(app) AND w.closed_at IS NULL AND w.ends_at <= herald_now_ms()
                     ORDER BY w.ends_at LIMIT \(Self.batch)
                       FOR UPDATE SKIP LOCKED
                )
                SELECT d.thread_id, d.uid, d.opened_at, d.ends_at, d.opened_by, d.max_age_ms, s.read_at, s.read_id
                  FROM due d
                  LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = d.uid AND s.thread_id = d.thread_id
                """)
            guard !due.isEmpty else { return 0 }
            var closes: [Close] = [], openers: [String] = [], ends: [Int64] = [], maxAges: [Int64] = []
            for row in due {
                closes.append(Close(app: app, thread: try row.decode("thread_id"), uid: try row.decode("uid"),
                                    openedAt: try row.decode("opened_at"), outcome: Routing.Skip.read.rawValue,
                                    readAt: try row.decode("read_at"), readID: try row.decode("read_id")))
                openers.append(try row.decode("opened_by"))
                ends.append(try row.decode("ends_at"))
                maxAges.append(try row.decode("max_age_ms"))
            }
            // the replies each window held and were not deleted since: their count, the latest ids, the senders
            var held: [Int: (count: Int, latest: String, senders: String)] = [:]
            for row in try connection.query("""
                SELECT h.window_no, count(*)::int AS count,
                       array_to_json((array_agg(h.id ORDER BY h.sent_at DESC, h.id COLLATE "C" DESC))[1:\(DigestJob.maxMessageIDs)])::text AS latest,
                       array_to_json(array_agg(h.sender ORDER BY h.sent_at DESC, h.id COLLATE "C" DESC))::text AS senders
                  FROM herald_digest_held_windows(\(app), \(closes.map(\.thread))::text[], \(closes.map(\.uid))::text[], \(openers)::text[],
                                                  \(closes.map(\.openedAt))::bigint[], \(ends)::bigint[], \(maxAges)::bigint[],
                                                  \(closes.map(\.readAt))::bigint[], \(closes.map(\.readID))::text[]) h
                 WHERE h.deleted_at IS NULL
                 GROUP BY h.window_no
                """) {
                held[try row.decode("window_no", as: Int.self) - 1] = (try row.decode("count"), try row.decode("latest"), try row.decode("senders"))
            }
            // the routing inputs of the last held reply, for each window that held one
            let deciding = closes.indices.filter { held[$0] != nil }
            let latestOf = try deciding.map { try JobPayload.strings(held[$0]!.latest).first ?? "" }
            var inputs: [Int: PostgresRow] = [:]
            if !deciding.isEmpty {
                for row in try connection.query("""
                    SELECT x.n, m.id AS message_id, m.sender, m.group_id, m.user_a, m.user_b, m.sent_at, m.category, m.send_notification,
                           m.conversation_id,
                           \(Visibility.access("m", uid: "x.uid", app: app)) AS has_access,
                           s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked,
                           \(RecipientRow.columns(uid: "x.uid", app: app))
                      FROM unnest(\(deciding.map { closes[$0].uid })::text[], \(deciding.map { closes[$0].thread })::text[], \(latestOf)::text[],
                                  \(deciding)::int[]) AS x(uid, thread_id, message_id, n)
                      JOIN messages m ON m.app = \(app) AND m.id = x.message_id
                      LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = x.uid AND s.thread_id = x.thread_id
                    """) {
                    inputs[try row.decode("n", as: Int.self)] = row
                }
            }
            var settings: AppSettings?
            var jobs: [DigestJob] = []
            let now = currentTimeMilliseconds()
            for index in closes.indices {
                guard let (count, latestIDs, senderList) = held[index], count > 0, let row = inputs[index] else { continue }
                let close = closes[index]
                let messageID = try row.decode("message_id", as: String.self)
                if settings == nil { settings = try PreferenceStore().settings(app: app, on: connection) }
                let appSettings = settings!
                let decision = try Self.decide(row, recipient: close.uid, thread: close.thread, settings: appSettings, now: now)
                guard case .notified(let reason) = decision.outcome else {
                    closes[index].outcome = decision.code
                    continue
                }
                closes[index].outcome = "sent"
                let latest = try JobPayload.strings(latestIDs)
                var senders: [String] = []
                for sender in try JobPayload.strings(senderList) where !senders.contains(sender) {
                    senders.append(sender)
                    if senders.count == DigestJob.maxSenders { break }
                }
                let preferences = Fanout.effective(stored: try row.decode("preferences", as: String?.self), settings: appSettings)
                jobs.append(DigestJob(app: app, recipient: close.uid, message: messageID, thread: close.thread, reason: reason.rawValue,
                                      privacy: Fanout.privacy(settings: appSettings, preferences: preferences),
                                      count: count, messageIDs: latest.reversed(), senders: senders))
            }
            if pauseAfterDecidingMs > 0 {
                logger.info("digest windows decided", ["windows": .int(closes.count), "digests": .int(jobs.count)])
                usleep(UInt32(pauseAfterDecidingMs) * 1000)
            }
            let ids = try DigestJob.insert(app: app, jobs, on: connection)
            try connection.query("""
                UPDATE digest_windows w
                   SET closed_at = herald_now_ms(), outcome = x.outcome, digest_job = x.job, read_at = x.read_at, read_id = x.read_id
                  FROM unnest(\(closes.map(\.app))::text[], \(closes.map(\.thread))::text[], \(closes.map(\.uid))::text[], \(closes.map(\.openedAt))::bigint[], \(closes.map(\.outcome))::text[], \(closes.map { $0.outcome == "sent" ? ids[$0.app + "\u{1F}" + $0.uid + "\u{1F}" + $0.thread] : nil })::bigint[], \(closes.map(\.readAt))::bigint[], \(closes.map(\.readID))::text[])
                       AS x(app, thread, uid, opened_at, outcome, job, read_at, read_id)
                 WHERE w.app = \(app) AND w.app = x.app AND w.thread_id = x.thread AND w.uid = x.uid AND w.opened_at = x.opened_at
                """)
            return closes.count
        }
    }

    /// A JSON array of strings, unpacked in SQL with `jsonb_array_elements_text`.
    package static func json(_ strings: [String]) -> String {
        var writer = JSONWriter()
        writer.array(strings: strings)
        return writer.text
    }

    /// What became of one window.
    package struct Close {
        package let app: String
        package let thread: String
        package let uid: String
        package let openedAt: Int64
        package var outcome: String
        package let readAt: Int64?
        package let readID: String?
    }

    /// SPEC §17: §8.1 judged again for the recipient at the window's end, for the last held reply
    /// (held replies neither mention nor quote the recipient).
    package static func decide(_ row: PostgresRow, recipient uid: String, thread: String, settings: AppSettings,
                       now: Int64) throws -> Routing.Decision {
        let message = try DomainEvent.MessageCreated(row: row, id: try row.decode("message_id"), thread: thread)
        let subscription = try Routing.SubscriptionState(row: row, asOf: now)
        var input = Fanout.input(message, recipient: uid, try RecipientRow(row, settings: settings), subscription: subscription,
                                 mentionedExplicitly: false, settings: settings, now: now)
        input.hasAccess = try row.decode("has_access", as: Bool.self)
        return Routing.decide(input)
    }
}

/// A `digest` job (SPEC §17): a row job of the last held reply's event, with the held replies'
/// ids (in `clear_ids`), their count and senders; title, body and badge are made at claim.
package struct DigestJob {
    package static let maxMessageIDs = 100
    package static let maxSenders = 5

    package let app: String
    package let recipient: String
    package let message: String
    /// The thread whose window the digest closes.
    package let thread: String
    package let reason: String
    package let privacy: Bool
    package let count: Int
    package let messageIDs: [String]
    package let senders: [String]

    /// Inserts the jobs; returns each one's id by app, recipient and thread.
    package static func insert(app: String, _ jobs: [DigestJob], on connection: PostgresConnection) throws -> [String: Int64] {
        guard !jobs.isEmpty else { return [:] }
        let rows = try connection.query("""
            INSERT INTO job_rows (app, message_id, recipient, event_source, event_id, event_type, reason, privacy, kind,
                                  clear_ids, digest_count, digest_senders)
            SELECT x.app, x.message, x.recipient, m.event_source, m.event_id, m.event_type, x.reason, x.privacy, 'digest',
                   ARRAY(SELECT jsonb_array_elements_text(x.ids::jsonb)), x.count,
                   ARRAY(SELECT jsonb_array_elements_text(x.senders::jsonb))
              FROM unnest(\(jobs.map(\.app))::text[], \(jobs.map(\.message))::text[], \(jobs.map(\.recipient))::text[], \(jobs.map(\.reason))::text[], \(jobs.map(\.privacy))::boolean[], \(jobs.map(\.count))::int[], \(jobs.map { DigestCloser.json($0.messageIDs) })::text[], \(jobs.map { DigestCloser.json($0.senders) })::text[])
                   AS x(app, message, recipient, reason, privacy, count, ids, senders)
              JOIN messages m ON m.app = \(app) AND m.app = x.app AND m.id = x.message
            ON CONFLICT DO NOTHING
            RETURNING id, recipient, message_id
            """)
        // (each job's thread from the window it closes: a subquery in RETURNING would run on the
        // worker inside the insert, which Citus refuses)
        var threads: [String: String] = [:]
        for job in jobs { threads[job.recipient + "\u{1F}" + job.message] = job.thread }
        var ids: [String: Int64] = [:]
        for row in rows {
            let recipient = try row.decode("recipient", as: String.self)
            let thread = threads[recipient + "\u{1F}" + (try row.decode("message_id", as: String.self))] ?? ""
            ids[app + "\u{1F}" + recipient + "\u{1F}" + thread] = try row.decode("id")
        }
        return ids
    }
}
