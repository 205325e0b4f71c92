-- Retractions (SPEC §11.4): a deleted message's recipients whose jobs were already claimed get
-- a `retract` job (its collapse ids in `clear_ids`), so push senders remove what is shown.
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('clear', 'retract'));
