-- The fan-out's walk of a group's members in byte order gets an index that nothing else can pick.
--
-- 0007 added (app, group_id, uid COLLATE "C") for the walk. It starts with the primary key's
-- (app, group_id), so for a look-up of one member (`g.app = … AND g.group_id = … AND g.uid = …`)
-- a planner without statistics (a new table, a new group's rows before the first ANALYZE) saw
-- the two as equally cheap, and when it took this one the uid was only a filter: the look-up read
-- the whole group. The inbox refresh of a 500-member thread took 80–114 ms instead of a few
-- (every subscriber read the group) while it held the thread's lock, and replies waited
-- (S2 in `make bench`, `EXPLAIN (ANALYZE)` in docs/benchmarks.md). The walk now names its group
-- as one key, ARRAY[app, group_id] (`Fanout.groupWalk`), which no look-up by member uses.
CREATE INDEX group_members_walk ON group_members ((ARRAY[app, group_id]), (uid COLLATE "C"));
DROP INDEX IF EXISTS group_members_by_uid_bytes;
