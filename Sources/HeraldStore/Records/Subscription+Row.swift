import HeraldDomain
import Postgres

extension Routing.SubscriptionState {
    /// A recipient's subscription as of `at`, from the `subscriptions` columns a statement selects
    /// beside its other inputs (`subscribed`, `since`, `manual_at`, `unsubscribed_at`; all NULL
    /// when the recipient has no row): the one reading of that row for every producer and explain.
    package init(row: PostgresRow, asOf at: Int64) throws {
        self.init(subscribed: try row.decode("subscribed"), since: try row.decode("since"), manualAt: try row.decode("manual_at"),
                  unsubscribedAt: try row.decode("unsubscribed_at"), asOf: at)
    }

    /// The same row as judged at a reaction's time (SPEC §11.2).
    package init(row: PostgresRow, judgedAt at: Int64) throws {
        self.init(subscribed: try row.decode("subscribed"), since: try row.decode("since"), manualAt: try row.decode("manual_at"),
                  unsubscribedAt: try row.decode("unsubscribed_at"), judgedAt: at)
    }
}
