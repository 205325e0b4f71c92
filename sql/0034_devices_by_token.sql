-- A recipient's devices get an index that nothing else can pick, as the fan-out's walk did
-- (0031_group_members_walk.sql).
--
-- The claim reads each job's devices by (app, uid), which the primary key (app, uid, id) serves.
-- devices_by_token (app, platform, md5(token)) also starts with the app, so a planner whose
-- statistics predate the app's devices (a new app, 200,000 devices registered since the last
-- ANALYZE) saw both as one-row look-ups, took this one, and the uid was only a filter: every job
-- of a claim read every device of its app (W5 of `make bench` on a cluster with older data: 98 ms
-- a job, 10 s a claim of 100). The token's index now leads with the token, which a look-up by user
-- cannot use; the app stays in it (last) because Citus keeps a unique index only when it holds
-- the distribution column.
CREATE UNIQUE INDEX devices_by_token_key ON devices (platform, md5(token), app);
DROP INDEX devices_by_token;
ALTER INDEX devices_by_token_key RENAME TO devices_by_token;
