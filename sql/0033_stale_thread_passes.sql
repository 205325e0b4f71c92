-- The inbox refresher brings a stale thread's subscriber rows up to date in slices of a bounded
-- size, each in a transaction of its own under the thread's lock, instead of all of them at
-- once: refreshing the 100,000 subscribers of one thread took 2.6 s, and every reply to the
-- thread waited for it, each round (herald_refresh_thread_rows, docs/inbox.md).
--
-- A pass walks the subscribers by uid: `refresh_after` is the last uid refreshed (NULL: no pass
-- under way), `refresh_version` the thread row's version (its xmin) when the pass began. The
-- thread leaves stale_threads only when a pass ends on the version it began with — no reply
-- changed the thread in between, so every slice wrote the same, current, values.
ALTER TABLE stale_threads ADD COLUMN refresh_after text, ADD COLUMN refresh_version text;
