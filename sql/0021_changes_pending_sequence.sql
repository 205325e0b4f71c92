-- changes_pending.ord came from an identity column, and PostgreSQL 15 makes the sequence of an
-- unlogged table's identity column unlogged too. On a standby that is promoted, that
-- sequence's page reads as zeros ("bad magic number in sequence"), so every ingest after a
-- failover failed with 500 (found by `make fleet-test`, fault 3). A logged sequence numbers
-- the pending rows instead: nextval writes WAL once per 32 values. The table stays unlogged:
-- its rows never outlive their transaction, and a promoted standby starts it empty.
ALTER TABLE changes_pending ALTER COLUMN ord DROP IDENTITY;
CREATE SEQUENCE changes_pending_ord AS bigint OWNED BY changes_pending.ord;
ALTER TABLE changes_pending ALTER COLUMN ord SET DEFAULT nextval('changes_pending_ord');
