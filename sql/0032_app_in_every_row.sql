-- Every row of an app's data names its app (issue 39). On Citus a table is placed by `app`
-- (docs/scaling.md), and a statement reaches one worker only when every table it touches is
-- filtered by it. job_block_marks and changes_commits were found through their block or
-- transaction alone.
ALTER TABLE job_block_marks ADD COLUMN app text;
UPDATE job_block_marks k SET app = b.app FROM job_blocks b WHERE b.id = k.block;
DELETE FROM job_block_marks WHERE app IS NULL;
ALTER TABLE job_block_marks ALTER COLUMN app SET NOT NULL;

-- The jobs' keys lead with their app, as every other table's: a statement names a job by (app, id)
-- (one probe of the key, on Citus of the app's shard).
ALTER TABLE job_rows DROP CONSTRAINT jobs_pkey;
ALTER TABLE job_rows ADD CONSTRAINT jobs_pkey PRIMARY KEY (app, id);
ALTER TABLE job_blocks DROP CONSTRAINT job_blocks_pkey;
ALTER TABLE job_blocks ADD PRIMARY KEY (app, id);
ALTER TABLE job_block_marks DROP CONSTRAINT job_block_marks_pkey;
ALTER TABLE job_block_marks ADD PRIMARY KEY (app, block);
ALTER TABLE job_leases DROP CONSTRAINT job_leases_pkey;
ALTER TABLE job_leases ADD PRIMARY KEY (app, block, first);
CREATE OR REPLACE VIEW job_block_positions AS
SELECT b.id * 1024 + p.n - 1 AS id, b.app, b.message_id, p.recipient, b.event_source, b.event_id, b.event_type,
       herald_reason_name(b.reasons[p.n]) AS reason, b.privacy[p.n] AS privacy, 0 AS badge,
       CASE WHEN p.n > b.stop THEN 'cancelled' WHEN p.n > b.claimed THEN 'ready'
            WHEN substring(k.acked FROM p.n::int FOR 1) = B'1' THEN 'acked' ELSE 'leased' END AS state,
       CASE WHEN p.n > b.claimed THEN 0 ELSE 1 END AS attempt,
       b.created_at, b.created_at AS available_at, NULL::bigint AS lease_until, NULL::text AS last_error,
       b.created_at AS updated_at, NULL::text AS kind, NULL::text AS exclude_device, NULL::text[] AS clear_ids,
       NULL::text AS template_reason, NULL::text AS subject_id, NULL::bigint AS sync_at, NULL::text AS sync_by,
       b.id AS block, (p.n - 1)::integer AS position,
       coalesce(substring(k.moved FROM p.n::int FOR 1) = B'1', false) AS moved
  FROM job_blocks b
  LEFT JOIN job_block_marks k ON k.app = b.app AND k.block = b.id
 CROSS JOIN LATERAL unnest(b.recipients) WITH ORDINALITY AS p(recipient, n);

-- Every job, one row each: the row jobs and the blocks' jobs that did not move out.

-- One commit step per app a transaction changed (on Citus, each on the worker that holds the app).
ALTER TABLE changes_commits ADD COLUMN app text NOT NULL;
ALTER TABLE changes_commits DROP CONSTRAINT changes_commits_pkey;
ALTER TABLE changes_commits ADD PRIMARY KEY (app, xid);

-- The arming trigger reads the apps of the noted rows (herald_arm_changes).
DROP TRIGGER changes_pending_arm ON changes_pending;
CREATE TRIGGER changes_pending_arm AFTER INSERT ON changes_pending REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION herald_arm_changes();
