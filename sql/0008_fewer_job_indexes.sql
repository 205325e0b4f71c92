-- Fewer indexes on jobs. Every insert writes an entry in each index, and every state change
-- (ready → leased → acked) is a non-HOT update that writes one in each index without a
-- predicate. With 9 indexes an insert wrote 6 entries and a state change 4; W1, W3 and W5 of
-- `make bench` all spend most of their database time there.
--
-- * The one-job-per-(event, recipient) key now leads with (recipient, message_id), so it also
--   serves the routing explanation's lookup of a user's job for a message, which had an index
--   of its own. An event names one message, so adding message_id changes nothing it enforces.
-- * Cancelling the unclaimed jobs of deleted messages goes through one index by thread
--   (coalesce(parent_message_id, message_id)) instead of one by message and one by parent.
CREATE UNIQUE INDEX jobs_one_per_event_recipient ON jobs (app, recipient, message_id, event_source, event_id);
ALTER TABLE jobs DROP CONSTRAINT jobs_app_event_source_event_id_recipient_key;
DROP INDEX jobs_by_recipient_message;
DROP INDEX jobs_unclaimed_by_message;
DROP INDEX jobs_unclaimed_by_parent;
CREATE INDEX jobs_unclaimed_by_thread ON jobs (app, (coalesce(parent_message_id, message_id))) WHERE state = 'ready';
