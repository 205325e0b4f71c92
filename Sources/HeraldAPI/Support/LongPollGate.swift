import HeraldDomain
import HeraldStore
import HTTPServer
import Synchronization

/// Admission of long polls (a claim or a feed read with `waitSeconds`, SPEC §9 and §14). A long
/// poll holds an HTTP connection for up to 30 s, so without a bound a crowd of them takes every
/// connection and `/healthz` and ingest find none. At most `total` wait at once (by default half
/// of `HERALD_MAX_CONNECTIONS`: the other half stays for short requests), at most `perApp` of one
/// app (one tenant cannot take every slot) and `perUser` of one user's feed; a long poll beyond a
/// bound is answered `429 ERR_OVERLOADED` with `Retry-After` at once. Shared by `JobWaiter` and
/// `ChangeWaiter`, which enter when a poll starts to wait and leave when it is answered.
package final class LongPollGate: Sendable {
    package struct Limits: Sendable, Equatable {
        package var total: Int
        package var perApp: Int
        package var perUser: Int

        package init(total: Int, perApp: Int, perUser: Int) {
            self.total = total
            self.perApp = perApp
            self.perUser = perUser
        }
    }

    private struct Counts {
        package var total = 0
        package var apps: [String: Int] = [:]
        package var users: [String: Int] = [:]
    }

    package let limits: Limits
    private let counts = Mutex(Counts())

    package init(limits: Limits) {
        self.limits = limits
    }

    /// Long polls waiting now.
    package var waiting: Int { counts.withLock { $0.total } }

    /// Takes a slot for a long poll of `app` (and of `user`'s feed, "app<US>uid"), or throws
    /// `429 ERR_OVERLOADED` when a bound is reached.
    package func enter(app: String, user: String? = nil) throws(HTTPError) {
        let admitted = counts.withLock { counts -> Bool in
            guard counts.total < limits.total, counts.apps[app, default: 0] < limits.perApp else { return false }
            if let user {
                guard counts.users[user, default: 0] < limits.perUser else { return false }
                counts.users[user, default: 0] += 1
            }
            counts.total += 1
            counts.apps[app, default: 0] += 1
            return true
        }
        guard admitted else { throw HTTPError.overloaded(retryAfterSeconds: 1) }
    }

    /// Gives back the slot that `enter` took.
    package func leave(app: String, user: String? = nil) {
        counts.withLock { counts in
            counts.total -= 1
            Self.decrement(&counts.apps, app)
            if let user { Self.decrement(&counts.users, user) }
        }
    }

    private static func decrement(_ table: inout [String: Int], _ key: String) {
        let left = table[key, default: 0] - 1
        table[key] = left > 0 ? left : nil
    }
}
