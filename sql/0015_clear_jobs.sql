-- Jobs that are not a message's notification (SPEC §13.2): `kind` 'clear' when a read moved
-- past replies already pushed to the reader (null: the message's own kind, message or reply,
-- derived from its row). `exclude_device` is the device that acted, which the job's devices
-- leave out; `clear_ids` the collapse ids to remove. Nullable columns: no table rewrite, and a
-- notification job's row stays as narrow as it was.
ALTER TABLE jobs
    ADD COLUMN kind            text CHECK (kind IN ('clear')),
    ADD COLUMN exclude_device  text,
    ADD COLUMN clear_ids       text[];
