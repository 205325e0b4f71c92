-- Thread digests (SPEC §17, sql/0028_thread_digests.sql): which replies a recipient's digest
-- window held, derived from the facts rather than recorded per reply — the one definition that
-- the window's end (DigestCloser) and the explain endpoint (RoutingAPI) both use.
--
-- Held: a reply in the thread, other than the one that opened the window, that Herald applied
-- while the window was open ([p_from, p_to) of its event's received_at), was not stale then, and
-- was digestible for the recipient — not theirs, not a silent custom message, not mentioning
-- them or @all, not quoting them — and that is after the read position (p_read_at, p_read_id).
-- Deleted replies are returned with their deleted_at: the caller decides.
CREATE OR REPLACE FUNCTION herald_digest_held(p_app text, p_thread text, p_uid text, p_opened_by text,
                                              p_from bigint, p_to bigint, p_max_age_ms bigint,
                                              p_read_at bigint, p_read_id text)
    RETURNS TABLE (id text, sender text, sent_at bigint, deleted_at bigint)
    -- PL/pgSQL, not SQL: on Citus a SQL function's statement reaches the planner with its
    -- arguments as parameters, which Citus cannot route (inlined, the same happens on the worker)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT m.id, m.sender, m.sent_at, m.deleted_at
      FROM messages m
      -- each reply's event through its key (a join could scan the app's events)
     CROSS JOIN LATERAL (SELECT e.received_at FROM events e
                          WHERE e.app = p_app AND e.source = m.event_source AND e.id = m.event_id OFFSET 0) e
     WHERE m.app = p_app AND m.parent_id = p_thread AND m.created_seen AND m.id <> p_opened_by
       -- a reply older than maxEventAgeSeconds when applied was never routed (SPEC §11.5): this
       -- also bounds the scan of the thread's replies by time
       AND (p_max_age_ms = 0 OR m.sent_at >= p_from - p_max_age_ms)
       AND e.received_at >= p_from AND e.received_at < p_to
       AND (p_max_age_ms = 0 OR m.sent_at >= e.received_at - p_max_age_ms)
       AND m.sender <> p_uid
       AND NOT m.mentions_all
       AND m.quoted_sender IS DISTINCT FROM p_uid
       AND NOT (m.category = 'custom' AND m.send_notification IS NOT TRUE)
       AND NOT EXISTS (SELECT 1 FROM mentions mn WHERE mn.app = p_app AND mn.message_id = m.id AND mn.at = m.sent_at
                                                   AND mn.uid = p_uid)
       AND (p_read_at IS NULL OR (m.sent_at, m.id COLLATE "C") > (p_read_at, p_read_id COLLATE "C"));
END
$$;
