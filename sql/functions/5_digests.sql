-- Thread digests (SPEC §17, sql/0028_thread_digests.sql): which replies a recipient's digest
-- window held, derived from the facts rather than recorded per reply — the one definition that
-- the window's end (DigestCloser) and the explain endpoint (RoutingAPI) both use.
--
-- Held: a reply in the thread, other than the one that opened the window, that Herald applied
-- while the window was open ([p_from, p_to) of its event's received_at), was not stale then, and
-- was digestible for the recipient — not theirs, not a silent custom message, not mentioning
-- them or @all, not quoting them — and that is after the read position (p_read_at, p_read_id).
-- Deleted replies are returned with their deleted_at: the caller decides.
--
-- herald_digest_held_windows answers for many windows at once (the closer's batch): each
-- thread's candidate replies are read once with their event time and the users they mention,
-- then matched to the windows in memory, so closing the windows of a thread costs one pass over
-- its replies rather than one per window (499 windows of a 200-reply burst: 7 s before).
-- herald_digest_held is the same for one window (explain).
CREATE OR REPLACE FUNCTION herald_digest_held_windows(p_app text, p_threads text[], p_uids text[], p_opened_by text[],
                                                      p_from bigint[], p_to bigint[], p_max_age_ms bigint[],
                                                      p_read_at bigint[], p_read_id text[])
    -- window_no: the window's position in the arrays, from 1
    RETURNS TABLE (window_no int, id text, sender text, sent_at bigint, deleted_at bigint)
    -- PL/pgSQL, not SQL: on Citus a SQL function's statement reaches the planner with its
    -- arguments as parameters, which Citus cannot route (inlined, the same happens on the worker)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    WITH w AS MATERIALIZED (
        SELECT x.n::int AS n, x.thread_id, x.uid, x.opened_by, x.f, x.t, x.max_age, x.read_at, x.read_id
          FROM unnest(p_threads, p_uids, p_opened_by, p_from, p_to, p_max_age_ms, p_read_at, p_read_id)
               WITH ORDINALITY AS x(thread_id, uid, opened_by, f, t, max_age, read_at, read_id, n)
    ), span AS (
        -- each thread once: from its earliest window's start to its latest one's end
        SELECT w.thread_id, min(w.f) AS f, max(w.t) AS t, bool_or(w.max_age = 0) AS unbounded, max(w.max_age) AS max_age
          FROM w GROUP BY w.thread_id
    ), r AS MATERIALIZED (
        -- the replies applied while one of its windows was open, each with its event's time and
        -- the users it mentions
        SELECT m.id, m.parent_id, m.sender, m.sent_at, m.deleted_at, m.quoted_sender, e.received_at,
               ARRAY(SELECT mn.uid FROM mentions mn WHERE mn.app = p_app AND mn.message_id = m.id AND mn.at = m.sent_at) AS mentioned
          FROM span
          JOIN messages m ON m.app = p_app AND m.parent_id = span.thread_id AND m.created_seen
                         -- a reply older than maxEventAgeSeconds when applied was never routed
                         -- (SPEC §11.5): this also bounds the scan of the thread's replies by time
                         AND (span.unbounded OR m.sent_at >= span.f - span.max_age)
          -- each reply's event through its key (a join could scan the app's events)
         CROSS JOIN LATERAL (SELECT e.received_at FROM events e
                              WHERE e.app = p_app AND e.source = m.event_source AND e.id = m.event_id OFFSET 0) e
         WHERE e.received_at >= span.f AND e.received_at < span.t
           AND NOT m.mentions_all
           AND NOT (m.category = 'custom' AND m.send_notification IS NOT TRUE)
    )
    SELECT w.n, r.id, r.sender, r.sent_at, r.deleted_at
      FROM w
      JOIN r ON r.parent_id = w.thread_id
     WHERE r.id <> w.opened_by
       AND r.received_at >= w.f AND r.received_at < w.t
       AND (w.max_age = 0 OR (r.sent_at >= w.f - w.max_age AND r.sent_at >= r.received_at - w.max_age))
       AND r.sender <> w.uid
       AND NOT (w.uid = ANY (r.mentioned))
       AND r.quoted_sender IS DISTINCT FROM w.uid
       AND (w.read_at IS NULL OR (r.sent_at, r.id COLLATE "C") > (w.read_at, w.read_id COLLATE "C"));
END
$$;

CREATE OR REPLACE FUNCTION herald_digest_held(p_app text, p_thread text, p_uid text, p_opened_by text,
                                              p_from bigint, p_to bigint, p_max_age_ms bigint,
                                              p_read_at bigint, p_read_id text)
    RETURNS TABLE (id text, sender text, sent_at bigint, deleted_at bigint)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT h.id, h.sender, h.sent_at, h.deleted_at
      FROM herald_digest_held_windows(p_app, ARRAY[p_thread], ARRAY[p_uid], ARRAY[p_opened_by], ARRAY[p_from], ARRAY[p_to],
                                      ARRAY[p_max_age_ms], ARRAY[p_read_at], ARRAY[p_read_id]) h;
END
$$;
