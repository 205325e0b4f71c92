-- The Citus layout (issue 39, docs/scaling.md): applied by `herald migrate` after the migrations
-- and functions when HERALD_DB_MODE=citus or the citus extension is installed. Idempotent: a table
-- already placed is left alone, so it runs at every start.
--
-- * Reference tables (a copy on every node): what is looked up before the app is known, by a key's
--   or token key's id alone: apps, app_keys, token_keys.
-- * Every other table with an `app` column: distributed by `app`, co-located with `messages`, so
--   all of one app's rows of every table are on one worker and every statement of a request is
--   routed to it.
-- * schema_migrations stays on the coordinator.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
SET LOCAL citus.enable_unsafe_triggers TO on;
SET LOCAL client_min_messages TO warning;

-- A change noted in changes_pending belongs to the transaction that runs on the worker
-- (herald_commit_changes runs there and looks for pg_current_xact_id()). Citus evaluates the
-- defaults of an INSERT … VALUES sent through the coordinator on the coordinator, so the
-- transaction id is set on the shard, by a trigger, whoever wrote the row.
CREATE OR REPLACE FUNCTION herald_pending_xid() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN NEW.xid := pg_current_xact_id(); RETURN NEW; END $$;

-- No NOTIFY from Herald's functions: they run on the workers, inside transactions that Citus
-- commits in two phases (PREPARE TRANSACTION refuses one that notified), and no instance listens
-- there. The instances look for new changes and jobs themselves (NotificationListener).
CREATE OR REPLACE FUNCTION herald_notify(p_channel text, p_payload text) RETURNS void
    LANGUAGE sql AS $$ SELECT NULL::void $$;

DO $$
DECLARE
    t text;
    f regprocedure;
BEGIN
    -- Citus sends a statement to one worker when it knows the value of `app`; a generic plan
    -- (a prepared statement's after five runs, or a function's with force_generic_plan) does
    -- not, and complex statements then fail ("could not create distributed plan"). Custom plans
    -- on every node, for Herald's sessions and the functions that run on the workers.
    -- (Citus passes ALTER DATABASE … SET on to the workers.)
    EXECUTE format('ALTER DATABASE %I SET plan_cache_mode TO force_custom_plan', current_database());
    -- and no JIT on any node (the coordinator sends statements the sessions' own setting does not
    -- follow to the workers; see HeraldServer.sessionSettings)
    EXECUTE format('ALTER DATABASE %I SET jit TO off', current_database());
    SET plan_cache_mode TO force_custom_plan; -- and this session (a pool's first connection), from its commit
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.proname LIKE 'herald%' AND p.prokind = 'f'
                -- (not the SQL functions, which their callers inline: a SET would stop that)
                AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
                AND NOT coalesce('plan_cache_mode=force_custom_plan' = ANY (p.proconfig), false) LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode TO force_custom_plan', f);
    END LOOP;
    -- herald_member_at and herald_digest_held (with herald_digest_held_windows, which it calls)
    -- are called inside statements that Citus sends whole
    -- to the app's worker,
    -- and its own statements then run there too. Citus refuses such nesting unless allowed, since
    -- a function could read another worker's rows; this one reads only its p_app's rows, which
    -- are all on that worker.
    ALTER FUNCTION herald_member_at(text, text, text, bigint) SET citus.allow_nested_distributed_execution TO on;
    ALTER FUNCTION herald_digest_held(text, text, text, text, bigint, bigint, bigint, bigint, text)
        SET citus.allow_nested_distributed_execution TO on;
    ALTER FUNCTION herald_digest_held_windows(text, text[], text[], text[], bigint[], bigint[], bigint[], bigint[], text[])
        SET citus.allow_nested_distributed_execution TO on;

    FOREACH t IN ARRAY ARRAY['apps', 'app_keys', 'token_keys'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t::regclass AND repmodel = 't') THEN
            PERFORM create_reference_table(t);
        END IF;
    END LOOP;

    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'changes'::regclass) THEN
        -- change_seq numbers the feed on the workers: as a column default of a distributed table
        -- it is created on every node (each node draws from its own range).
        ALTER TABLE changes ALTER COLUMN seq SET DEFAULT nextval('change_seq');
        CREATE TRIGGER changes_pending_xid BEFORE INSERT ON changes_pending
            FOR EACH ROW EXECUTE FUNCTION herald_pending_xid();
    END IF;

    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'messages'::regclass AND partmethod = 'h') THEN
        PERFORM create_distributed_table('messages', 'app');
    END IF;
    FOR t IN
        SELECT c.relname
          FROM pg_class c
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'app' AND NOT a.attisdropped
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
           AND c.relname NOT IN ('apps', 'app_keys', 'token_keys', 'schema_migrations')
           AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid AND p.partmethod = 'h')
         ORDER BY c.relname
    LOOP
        PERFORM create_distributed_table(t, 'app', colocate_with => 'messages');
    END LOOP;

    -- The functions that work on one app take it first (p_app): distributed by it and co-located,
    -- a call made on its own (outside a transaction block) is sent to the app's worker and runs
    -- there whole. Inside Herald's transactions Citus does not delegate (force_delegation off),
    -- and their statements go to the worker one by one.
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.proname LIKE 'herald%' AND p.prokind = 'f' AND p.pronargs > 0
                AND p.proargnames[1] = 'p_app' AND p.proargtypes[0] = 'text'::regtype
                AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                                 WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid AND o.distribution_argument_index IS NOT NULL) LOOP
        PERFORM create_distributed_function(f, '$1'::text, colocate_with => 'messages'::text);
    END LOOP;
END
$$;
