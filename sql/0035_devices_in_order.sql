-- A claim reads every job's devices in the order they were registered (DeviceStore's
-- recipientDevices). With the primary key (app, uid, id) alone, each job's look-up was a bitmap
-- scan and a sort of its own, and W5's `perf` showed starting those bitmaps and sorts as a tenth
-- of PostgreSQL's time; an index in registration order makes each look-up one index scan that
-- returns the devices sorted. Keys only: the table's columns stay out of it (a Web Push token
-- is a whole subscription), a covering index measured no faster (blockJobs' statement, 100 jobs
-- of two devices each, pgbench: 0.82 ms before, 0.76 with either index).
CREATE INDEX devices_in_order ON devices (app, uid, created_at, id);
