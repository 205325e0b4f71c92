-- The change feed's commit step without a lock-table entry per user (issue 32).
--
-- herald_commit_changes used to take one pg_advisory_xact_lock per distinct user of the
-- transaction. Advisory locks live in PostgreSQL's shared lock table (max_locks_per_transaction ×
-- max_connections slots for every backend together), so one valid batch that touched 30,000 users
-- failed at COMMIT with "out of shared memory", every redelivery failed the same way, and other
-- tenants' transactions failed with it. A row lock costs no lock-table slot (it is written in the
-- row itself), so each user of a transaction now has a row in changes_users that the commit step
-- locks, in one global order, until the transaction ends: the same serialisation per user, for
-- any number of users.
--
-- Unlogged: the rows carry nothing but their locks, are recreated on demand, and a crash or a
-- promoted standby starting it empty loses nothing.
CREATE UNLOGGED TABLE changes_users (
    app  text NOT NULL,
    uid  text NOT NULL,
    PRIMARY KEY (app, uid)
);

-- The commit step ran as a deferred trigger of every changes_pending row: a transaction with
-- 30,000 noted changes queued 30,000 calls, and each scanned the index entries of the rows the
-- first call had deleted (the commit grew with the square of the changes). Now the first note of
-- a transaction writes one row here, and the deferred trigger of that row is the commit step:
-- one call per transaction.
CREATE UNLOGGED TABLE changes_commits (
    xid xid8 PRIMARY KEY DEFAULT pg_current_xact_id()
);

CREATE FUNCTION herald_arm_changes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

DROP TRIGGER changes_pending_commit ON changes_pending;
CREATE TRIGGER changes_pending_arm AFTER INSERT ON changes_pending
    FOR EACH STATEMENT EXECUTE FUNCTION herald_arm_changes();
CREATE CONSTRAINT TRIGGER changes_commit AFTER INSERT ON changes_commits
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION herald_commit_changes();
