-- Inbox data at scale, for measurements (issue: inbox p99 at 1M threads / 5M subscriptions).
-- psql -v app=bench -v threads=1000000 -v groups=10000 -v per_group=20 -v subs_per_thread=5 -v heavy_threads=5000 -f scripts/inbox-data.sql
-- Users u<n> belong to group g<n % groups>; every thread of a group has subs_per_thread subscribers
-- among its members; the user "heavy" belongs to the first heavy_threads/100 groups... and is
-- subscribed to heavy_threads threads in them. Activity times collide often (1 s buckets) to
-- exercise the tie-break.
\set ON_ERROR_STOP on
BEGIN;
INSERT INTO apps (id) VALUES (:'app') ON CONFLICT DO NOTHING;
DELETE FROM subscriptions WHERE app = :'app';
DELETE FROM threads WHERE app = :'app';
DELETE FROM group_members WHERE app = :'app';

INSERT INTO group_members (app, group_id, uid, joined_at)
SELECT :'app', 'g' || (n % :groups), 'u' || n, 1
  FROM generate_series(0, :groups * :per_group - 1) AS n;
INSERT INTO group_members (app, group_id, uid, joined_at)
SELECT :'app', 'g' || g, 'heavy', 1 FROM generate_series(0, greatest(1, :heavy_threads / 100) - 1) AS g;

INSERT INTO threads (app, parent_id, conversation_id, receiver_type, group_id, author, parent_seen, parent_sent_at,
                     parent_text, reply_count, last_reply_id, last_reply_sender, last_reply_at, last_reply_text, updated_at)
SELECT :'app', 't' || n, 'group_g' || (n % :groups), 'group', 'g' || (n % :groups), 'u' || (n % :groups),
       true, 1700000000000 + n * 10, 'parent text of thread ' || n, 1 + n % 50,
       'r' || n, 'u' || ((n + 1) % :groups), 1700000000000 + (n / 1000) * 1000, 'the latest reply of thread ' || n,
       1700000000000
  FROM generate_series(0, :threads - 1) AS n;

INSERT INTO subscriptions (app, uid, thread_id, subscribed, source, reason, since, updated_at, conversation_id,
                           activity_at, visible, read_count, has_unread, unread_mentions)
SELECT :'app', 'u' || ((n % :groups) + :groups * ((n / :groups + k) % :per_group)), 't' || n, true, 'auto', 'reply',
       1700000000000 + n * 10, 1700000000000, 'group_g' || (n % :groups),
       1700000000000 + (n / 1000) * 1000, true,
       greatest(0, 1 + n % 50 - (n + k) % 7), least(1 + n % 50, (n + k) % 7) > 0, CASE WHEN (n + k) % 11 = 0 THEN 1 ELSE 0 END
  FROM generate_series(0, :threads - 1) AS n, generate_series(0, :subs_per_thread - 1) AS k;

INSERT INTO subscriptions (app, uid, thread_id, subscribed, source, reason, since, updated_at, conversation_id,
                           activity_at, visible, read_count, has_unread, unread_mentions)
SELECT :'app', 'heavy', 't' || n, true, 'auto', 'mention', 1700000000000 + n * 10, 1700000000000,
       'group_g' || (n % :groups), 1700000000000 + (n / 1000) * 1000, true,
       greatest(0, 1 + n % 50 - n % 3), n % 3 > 0, CASE WHEN n % 13 = 0 THEN 1 ELSE 0 END
  FROM generate_series(0, :threads - 1) AS n
 WHERE n % :groups < greatest(1, :heavy_threads / 100)
 LIMIT :heavy_threads;
COMMIT;
ANALYZE subscriptions;
ANALYZE threads;
ANALYZE group_members;
SELECT (SELECT count(*) FROM threads WHERE app = :'app') AS threads,
       (SELECT count(*) FROM subscriptions WHERE app = :'app') AS subscriptions,
       (SELECT count(*) FROM subscriptions WHERE app = :'app' AND uid = 'heavy') AS heavy_threads;
