-- Explain of an edit (SPEC §8.2, §11): `?event=<source>/<id>` may name a message.edited event,
-- so each edit's version records the event that brought it (null on a message's created version,
-- whose event is on its messages row, and on versions stored before this migration).
ALTER TABLE message_versions
    ADD COLUMN event_source text,
    ADD COLUMN event_id     text;
