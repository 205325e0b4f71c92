-- The event that created each message (SPEC §4, batching independence): when a trigger arrives
-- after messages it should have applied to (a late reply or mention that subscribes its user from
-- an earlier time), those messages are routed again for that user, and their jobs need the event.
ALTER TABLE messages
    ADD COLUMN event_source text,
    ADD COLUMN event_id     text,
    ADD COLUMN event_type   text;
