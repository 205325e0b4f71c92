-- Jobs in blocks (sql/0024_job_blocks.sql, docs/jobs.md): the claim and the return of expired
-- leases. (The views and the reason names are in the migration: a view replaced on every start
-- would take a lock that queries of other instances wait on.)

-- Returns the block ranges of `p_app` whose lease ran out: their positions neither acked nor
-- moved move out to job_rows as ready jobs (attempt 1, available from the lease's end, as a row
-- job's expired lease), and the range is gone. The marks are locked first, in block order, so
-- that an ack cannot land between reading them and moving.
CREATE OR REPLACE FUNCTION herald_expire_block_leases(p_app text, p_now bigint) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    v_moved integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM job_leases WHERE app = p_app AND until <= p_now) THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM job_block_marks k
      WHERE k.app = p_app AND k.block IN (SELECT block FROM job_leases WHERE app = p_app AND until <= p_now)
      ORDER BY k.block FOR UPDATE;
    WITH due AS (
        DELETE FROM job_leases WHERE app = p_app AND until <= p_now RETURNING block, first, last, until
    ), lost AS (
        SELECT d.block, p.n, d.until
          FROM due d JOIN job_block_marks k ON k.app = p_app AND k.block = d.block
         CROSS JOIN generate_series(d.first + 1, d.last) AS p(n)
         WHERE substring(k.acked | k.moved FROM p.n FOR 1) = B'0'
    ), moved AS (
        INSERT INTO job_rows (id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy,
                              state, attempt, created_at, available_at, updated_at)
        SELECT b.id * 1024 + l.n - 1, b.app, b.message_id, b.recipients[l.n], b.event_source, b.event_id, b.event_type,
               herald_reason_name(b.reasons[l.n]), b.privacy[l.n], 'ready', 1, b.created_at, l.until, p_now
          FROM lost l JOIN job_blocks b ON b.app = p_app AND b.id = l.block
        RETURNING 1
    ), marked AS (
        UPDATE job_block_marks k SET moved = k.moved | m.mask
          FROM (SELECT block, bit_or(herald_bit(n)) AS mask FROM lost GROUP BY block) m
         WHERE k.app = p_app AND k.block = m.block
        RETURNING 1
    )
    SELECT count(*) INTO v_moved FROM moved;
    RETURN v_moved;
END
$$;

-- Leases up to `p_max` jobs of `p_app` for `p_lease` seconds: first the ready row jobs (retries,
-- expired leases, silent jobs; they have waited already), in (available_at, id) order; then
-- ranges of the oldest blocks with jobs left, one block row update and one lease row per range.
-- Returns the row jobs' ids (block null) and the ranges [first, last) of blocks.
CREATE OR REPLACE FUNCTION herald_claim_jobs(p_app text, p_max integer, p_lease integer)
    RETURNS TABLE (row_id bigint, block bigint, first integer, last integer)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now   bigint := herald_now_ms();
    v_until bigint := herald_now_ms() + p_lease::bigint * 1000;
    v_ids   bigint[];
    v_left  integer;
    v_block record;
    v_at    bigint := -1;
    v_id    bigint := -1;
    v_take  integer;
BEGIN
    -- Marks before rows, the order of ack, fail and release (else two of them deadlock).
    PERFORM herald_expire_block_leases(p_app, v_now);
    UPDATE job_rows SET state = 'ready', available_at = lease_until, lease_until = NULL, updated_at = v_now
     WHERE app = p_app AND state = 'leased' AND lease_until <= v_now;
    -- The picked rows are updated through their ctid (a Tid Scan in every plan; see JobQueue).
    WITH claimed AS (
        UPDATE job_rows j SET state = 'leased', attempt = j.attempt + 1, lease_until = v_until, updated_at = v_now
         WHERE j.app = p_app AND j.ctid = ANY (ARRAY(SELECT ctid FROM job_rows
                                    WHERE app = p_app AND state = 'ready' AND available_at <= v_now
                                    ORDER BY available_at, id LIMIT p_max
                                    FOR UPDATE SKIP LOCKED))
        RETURNING j.id)
    SELECT coalesce(array_agg(id), '{}') INTO v_ids FROM claimed;
    RETURN QUERY SELECT x, NULL::bigint, NULL::integer, NULL::integer FROM unnest(v_ids) AS x;
    v_left := p_max - cardinality(v_ids);
    WHILE v_left > 0 LOOP
        SELECT b.id, b.claimed, b.stop, b.created_at INTO v_block
          FROM job_blocks b
         WHERE b.app = p_app AND b.claimed < b.stop AND (b.created_at, b.id) > (v_at, v_id)
         ORDER BY b.created_at, b.id LIMIT 1
           FOR UPDATE SKIP LOCKED;
        EXIT WHEN NOT FOUND;
        v_at := v_block.created_at;
        v_id := v_block.id;
        v_take := least(v_left, v_block.stop - v_block.claimed);
        UPDATE job_blocks SET claimed = claimed + v_take WHERE app = p_app AND id = v_block.id;
        IF v_block.claimed = 0 THEN
            INSERT INTO job_block_marks (app, block) VALUES (p_app, v_block.id) ON CONFLICT DO NOTHING;
        END IF;
        INSERT INTO job_leases (block, first, last, app, until)
        VALUES (v_block.id, v_block.claimed, v_block.claimed + v_take, p_app, v_until);
        row_id := NULL; block := v_block.id; first := v_block.claimed; last := v_block.claimed + v_take;
        RETURN NEXT;
        v_left := v_left - v_take;
    END LOOP;
END
$$;

-- The notification job (kind null) that `p_uid` has for message `p_message`, if any, whichever
-- its event: a moved job's row first, else its block's position, found by array_position (a C
-- loop over the block's recipients) rather than by expanding the block into rows as the `jobs`
-- view does. For catch-up and clear jobs, which ask this per (user, message). A set-returning
-- SQL function of one SELECT, so that the planner inlines it into the caller's query (a call
-- per row through the function manager cost catch-up 20 s for 100,000 (user, reply) pairs).
-- Unused since issue 39 (JobBlocks.wasClaimed replaced it: on Citus an inlined function reads the
-- worker's empty placeholder tables); kept for instances of the previous release during a rollout.
CREATE OR REPLACE FUNCTION herald_message_jobs(p_app text, p_message text, p_uid text)
    RETURNS TABLE (id bigint, state text, reason text, attempt integer)
    LANGUAGE sql STABLE ROWS 1 AS $$
    SELECT * FROM (
        SELECT r.id, r.state, r.reason, r.attempt FROM job_rows r
         WHERE r.app = p_app AND r.message_id = p_message AND r.recipient = p_uid AND r.kind IS NULL
        UNION ALL
        SELECT b.id * 1024 + p.i - 1,
               CASE WHEN p.i > b.stop THEN 'cancelled' WHEN p.i > b.claimed THEN 'ready'
                    WHEN substring(k.acked FROM p.i FOR 1) = B'1' THEN 'acked' ELSE 'leased' END,
               herald_reason_name(b.reasons[p.i]), CASE WHEN p.i > b.claimed THEN 0 ELSE 1 END
          FROM job_blocks b
         CROSS JOIN LATERAL (SELECT array_position(b.recipients, p_uid) AS i) p
          LEFT JOIN job_block_marks k ON k.app = b.app AND k.block = b.id
         WHERE b.app = p_app AND b.message_id = p_message AND p.i IS NOT NULL
    ) j LIMIT 1
$$;
