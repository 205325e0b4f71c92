-- A reply no longer rewrites every subscriber's row (issue 11). Unread counts are derived from a
-- per-row read count: a subscriber's unread replies are the thread's live replies after their
-- read position, `threads.reply_count - subscriptions.read_count`, so a reply after everyone's
-- read position changes no subscriber row. What must stay in the row for the inbox's indexes is
-- kept exact on transitions only: `has_unread` (false → true when a read row gets a reply) and
-- `unread_mentions` (a mention or an @all after the read position). The sort key `activity_at`
-- is refreshed in the background for threads listed in `stale_threads`; until then the inbox
-- reads those threads' rows from the threads themselves (see sql/functions/inbox.sql and
-- docs/inbox.md).
ALTER TABLE subscriptions
    ADD COLUMN read_count  integer NOT NULL DEFAULT 0,
    ADD COLUMN has_unread  boolean NOT NULL DEFAULT false;

UPDATE subscriptions s SET read_count = greatest(0, t.reply_count - s.unread_replies), has_unread = s.unread_replies > 0
  FROM threads t
 WHERE t.app = s.app AND t.parent_id = s.thread_id AND (s.unread_replies > 0 OR t.reply_count > 0);

CREATE INDEX subscriptions_inbox_has_unread ON subscriptions (app, uid, activity_at, (thread_id COLLATE "C"))
    INCLUDE (unread_mentions) WHERE visible AND has_unread;
DROP INDEX subscriptions_inbox_unread;
-- subscriptions_by_thread_all (app, thread_id) serves every lookup by thread.
DROP INDEX subscriptions_by_thread;
DROP FUNCTION herald_count_replies(text, text[], integer, text[], text[]);
ALTER TABLE subscriptions DROP COLUMN unread_replies;

-- Threads whose subscribers' activity_at is behind the thread; one row per thread however many
-- replies came since the last refresh.
CREATE TABLE stale_threads (
    app        text   NOT NULL,
    thread_id  text   NOT NULL,
    since      bigint NOT NULL DEFAULT herald_now_ms(),
    PRIMARY KEY (app, thread_id)
);
