-- Issue 32 (item 5, "linear on fresh statistics"): every lookup of one (user, thread)
-- subscription must be one index probe, whatever the planner believes.
--
-- With statistics taken before a large write (a batch mentioning 10,000 users of one thread),
-- the planner estimates one subscription per (app, thread) and picks the two-column
-- subscriptions_by_thread_all for a (uid, thread) probe, then filters every subscription of the
-- thread for each key: 10,000 probes × 10,000 rows, a minute for one late reply and 68 s in the
-- change feed's commit step (auto_explain under `make test`). With uid as the thread index's
-- third column, either index the planner picks is an exact probe; lookups by thread alone use
-- its prefix as before.
CREATE INDEX subscriptions_by_thread_uid ON subscriptions (app, thread_id, uid);
DROP INDEX subscriptions_by_thread_all;
