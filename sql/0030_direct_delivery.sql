-- Direct delivery (SPEC §13.4): a job is sent once to each of its devices, and a retry goes only
-- to the devices without a final outcome yet. A job that failed for some of its devices keeps
-- the ids of the others here (sent, removed, or failed for good), and the claim leaves them out
-- of its `devices`. Only direct delivery's retries write it; every other job has NULL.
ALTER TABLE job_rows ADD COLUMN delivered_devices text[];
