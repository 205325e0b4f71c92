-- Updates (SPEC §11.4, edits): an edited message's recipients whose jobs were already claimed
-- get an `update` job with the new body, built from the template of the job it updates
-- (`template_reason`: that job's reason).
ALTER TABLE jobs ADD COLUMN template_reason text;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('clear', 'retract', 'update'));
