-- storage-guard's records, audit log and fenced operations in PostgreSQL
-- (storage-guard --db postgresql://...; docs/storage-guard.md), in the
-- schema storage_guard. Run by storage-guard itself, after fencelock.sql,
-- in one transaction, when storage_guard.sg_schema_version() is missing or
-- older (or by `storage-guard --install --db ...`); safe to run again.
--
-- Who may do what. The installer (a superuser, or a role that may create
-- roles and schemas in the database) runs it once, and again at each
-- upgrade. storage-guard then runs as a role that is a member of
-- storage_guard_runner (NOLOGIN, made here): it may use the schema, read
-- and write these tables and run these functions, and it is a member of
-- fencelock_writer, which admits tokens; it needs no CREATE anywhere, and
-- it cannot lower a fence. Its operator's fence reset goes through
-- fencelock.repair, which it may call only if it is also made a member of
-- fencelock_repairer (docs/storage-guard.md, "On PostgreSQL"). Every
-- function runs with search_path pg_catalog, pg_temp and names its
-- objects by their schema (fencelock.sql says why that is enough).
--
-- Upgrading from the layout before the schema (version 1: the tables
-- sg_records, sg_log, sg_deleted and the functions in a schema such as
-- public): the tables move into storage_guard with their rows, and the old
-- functions are dropped; only tables that belong to the installing role
-- are taken over (another role's, maybe planted, make the install fail
-- until someone makes them the installer's or drops them).
--
-- As fencelock.sql, this file runs with search_path pg_catalog, pg_temp
-- (SET LOCAL: in one transaction, psql -1, as storage-guard runs it), and
-- refuses a schema storage_guard, or objects in it, of another role than
-- the installer, and any trigger, rule or row security on its tables.
--
-- Each request is one call of a function below, one statement and so one
-- transaction on one round trip: a storage-guard process that pauses or
-- dies never holds a lock between two statements. The functions run at
-- READ COMMITTED (storage-guard sets it), where every statement after a
-- lock sees what the lock's previous holder committed.
--
-- Locks, taken first and always in the same order, so that two
-- storage-guard transactions never wait for each other in a cycle:
--   1. the fence rows of the call's resources (fencelock.lock, FOR
--      UPDATE), in byte order: writers of one resource take turns, and the
--      admission and the audit row of each are made under its row lock, so
--      per resource the log's seq order is the commit order;
--   2. one transaction-level advisory lock per key (class 1936159339, 'sgrk'),
--      in byte order: the version preconditions of two writes of one key
--      under different resources cannot both pass on the same version.
-- A refused or failed-precondition call writes its audit rows only.

SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SET LOCAL search_path = pg_catalog, pg_temp;

DO $roles$
DECLARE
    v_me oid := pg_catalog.to_regrole(current_user);
    v_what text;
BEGIN
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.<>) 'pg_catalog, pg_temp' THEN
        RAISE EXCEPTION 'schema.sql must run in one transaction (psql -1), with its own search_path'
            USING ERRCODE = '55000';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'storage_guard_runner') THEN
        CREATE ROLE storage_guard_runner NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'storage_guard') THEN
        CREATE SCHEMA storage_guard;
    END IF;
    -- A schema made before this file by another role would be that role's
    -- to change (its functions to replace): refused.
    SELECT 'the schema storage_guard belongs to ' || pg_catalog.pg_get_userbyid(n.nspowner) INTO v_what
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'storage_guard' AND n.nspowner <> v_me;
    IF v_what IS NULL THEN
        SELECT pg_catalog.pg_get_userbyid(a.grantee) || ' may create in the schema storage_guard' INTO v_what
          FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
         WHERE n.nspname = 'storage_guard' AND a.privilege_type = 'CREATE' AND a.grantee <> v_me LIMIT 1;
    END IF;
    IF v_what IS NOT NULL THEN
        RAISE EXCEPTION 'schema.sql: % (made by someone else?): refusing to install in it', v_what
            USING ERRCODE = '42501';
    END IF;
END
$roles$;
GRANT fencelock_writer TO storage_guard_runner;

REVOKE ALL ON SCHEMA storage_guard FROM PUBLIC;
GRANT USAGE ON SCHEMA storage_guard TO storage_guard_runner;

-- Version 1, in a schema such as public: its tables move here, if they
-- are the installer's.
DO $upgrade$
DECLARE
    v_me oid := pg_catalog.to_regrole(current_user);
    v_ns oid;
    v_schema name;
    v_proc regprocedure;
BEGIN
    IF pg_catalog.to_regclass('storage_guard.sg_records') IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT c.relnamespace INTO v_ns FROM pg_catalog.pg_class c
     WHERE c.relname = 'sg_records' AND c.relkind = 'r' AND c.relpersistence = 'p' AND c.relowner = v_me LIMIT 1;
    IF v_ns IS NULL THEN
        -- Another role's (maybe planted, maybe version 1 made by storage-guard
        -- running as that role): neither adopted nor left behind unsaid.
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                    WHERE c.relname = 'sg_records' AND c.relkind = 'r' AND c.relpersistence = 'p') THEN
            RAISE EXCEPTION 'schema.sql: a table sg_records (version 1) belongs to another role: if it is '
                'storage-guard''s, make sg_records, sg_log and sg_deleted yours (ALTER TABLE ... OWNER TO) and '
                'run this again, else drop them' USING ERRCODE = '42501';
        END IF;
        RETURN;
    END IF;
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c WHERE c.relnamespace = v_ns AND c.relowner = v_me
         AND c.relkind = 'r' AND c.relname IN ('sg_records', 'sg_log', 'sg_deleted')) <> 3 THEN
        RAISE EXCEPTION 'schema.sql: sg_records, sg_log and sg_deleted of version 1 are not all yours'
            USING ERRCODE = '42501';
    END IF;
    FOR v_proc IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = v_ns AND p.proowner = v_me
           AND p.proname IN ('sg__outcome', 'sg__log', 'sg__ops', 'sg_apply', 'sg_read', 'sg_reset',
                             'sg_schema_version')
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', v_proc);
    END LOOP;
    SELECT n.nspname INTO v_schema FROM pg_catalog.pg_namespace n WHERE n.oid = v_ns;
    EXECUTE pg_catalog.format('ALTER TABLE %I.sg_records SET SCHEMA storage_guard', v_schema);
    EXECUTE pg_catalog.format('ALTER TABLE %I.sg_log SET SCHEMA storage_guard', v_schema);
    EXECUTE pg_catalog.format('ALTER TABLE %I.sg_deleted SET SCHEMA storage_guard', v_schema);
END
$upgrade$;

CREATE TABLE IF NOT EXISTS storage_guard.sg_records (
    key bytea PRIMARY KEY,
    resource bytea NOT NULL,
    value text NOT NULL,
    token bigint NOT NULL,
    version bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);

-- The log keeps refused writes too, so a replay can see what was turned away.
CREATE TABLE IF NOT EXISTS storage_guard.sg_log (
    seq bigserial PRIMARY KEY,
    time_ms bigint NOT NULL,
    op text NOT NULL,
    key bytea NOT NULL,
    resource bytea NOT NULL,
    token bigint NOT NULL,
    last_token bigint NOT NULL,
    outcome text NOT NULL,
    version bigint NOT NULL,
    batch bigint NOT NULL DEFAULT 0,
    -- The client's name from --auth-file: bytes, which need not be UTF-8.
    client bytea NOT NULL DEFAULT ''::bytea
);
CREATE INDEX IF NOT EXISTS sg_log_by_resource ON storage_guard.sg_log (resource, seq);
CREATE INDEX IF NOT EXISTS sg_log_by_key ON storage_guard.sg_log (key, seq);

-- The last version of each deleted key, so that a new record goes on from
-- it: an If-Match taken before a delete can never match its successor.
CREATE TABLE IF NOT EXISTS storage_guard.sg_deleted (
    key bytea PRIMARY KEY,
    version bigint NOT NULL
);

-- Outcomes are passed as numbers, those of enum sg_outcome (store.h), and
-- logged by name.
CREATE OR REPLACE FUNCTION storage_guard.sg__outcome(p_outcome int) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (ARRAY['accepted', 'stale', 'mismatch', 'aborted', 'not_found'])[p_outcome + 1]
$$;

-- PL/pgSQL, not SQL: its INSERT is planned once per session, where an SQL
-- function called from PERFORM plans its body on every call.
CREATE OR REPLACE FUNCTION storage_guard.sg__log(p_now bigint, p_op text, p_key bytea, p_resource bytea, p_token bigint,
                                   p_last bigint, p_outcome int, p_version bigint, p_batch bigint,
                                   p_client bytea, p_seq bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO storage_guard.sg_log (seq, time_ms, op, key, resource, token, last_token, outcome, version, batch, client)
    VALUES (COALESCE(p_seq, pg_catalog.nextval('storage_guard.sg_log_seq_seq')), p_now, p_op, p_key, p_resource, p_token, p_last,
            storage_guard.sg__outcome(p_outcome), CASE WHEN p_outcome = 0 THEN p_version ELSE 0 END, p_batch, p_client);
END
$$;

-- The ops of a call, in order, each checking its precondition (p_expects:
-- a version >= 1, 0 "no record", -1 none, -2 "a record exists") against
-- the record as the ops before it left it. Stops at the first that fails
-- (o_result 2, o_failed its index from 0), having written the ops before
-- it: the caller undoes them. Kinds: 1 put, 2 delete, 3 check.
CREATE OR REPLACE FUNCTION storage_guard.sg__ops(p_token bigint, p_now bigint, p_kinds int[], p_keys bytea[],
                                   p_resources bytea[], p_values text[], p_expects bigint[],
                                   OUT o_outcomes int[], OUT o_found bigint[], OUT o_versions bigint[],
                                   OUT o_result int, OUT o_failed int)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int := pg_catalog.array_length(p_keys, 1);
    v_found bigint;
    v_new bigint;
BEGIN
    o_outcomes := pg_catalog.array_fill(3, ARRAY[n]);
    o_found := pg_catalog.array_fill(0::bigint, ARRAY[n]);
    o_versions := pg_catalog.array_fill(0::bigint, ARRAY[n]);
    o_result := 0;
    o_failed := 0;
    FOR i IN 1..n LOOP
        v_found := COALESCE((SELECT r.version FROM storage_guard.sg_records r WHERE r.key = p_keys[i]), 0);
        o_found[i] := v_found;
        IF NOT (p_expects[i] = -1 OR (p_expects[i] = -2 AND v_found > 0) OR p_expects[i] = v_found) THEN
            o_result := 2;
            o_failed := i - 1;
            RETURN;
        END IF;
        o_outcomes[i] := 0;
        o_versions[i] := v_found;
        IF p_kinds[i] = 1 THEN
            -- A new record continues from its key's last deleted version.
            INSERT INTO storage_guard.sg_records AS r (key, resource, value, token, version, updated_at_ms)
            VALUES (p_keys[i], p_resources[i], p_values[i], p_token,
                    1 + COALESCE((SELECT d.version FROM storage_guard.sg_deleted d WHERE d.key = p_keys[i]), 0), p_now)
            ON CONFLICT (key) DO UPDATE SET resource = excluded.resource, value = excluded.value,
                token = excluded.token, version = r.version + 1, updated_at_ms = excluded.updated_at_ms
            RETURNING r.version INTO v_new;
            o_versions[i] := v_new;
            IF v_found = 0 THEN
                DELETE FROM storage_guard.sg_deleted d WHERE d.key = p_keys[i];
            END IF;
        ELSIF p_kinds[i] = 2 THEN
            IF v_found = 0 THEN
                o_outcomes[i] := 4;
            ELSE
                DELETE FROM storage_guard.sg_records r WHERE r.key = p_keys[i];
                INSERT INTO storage_guard.sg_deleted AS d (key, version) VALUES (p_keys[i], v_found)
                    ON CONFLICT (key) DO UPDATE SET version = excluded.version;
            END IF;
        END IF;
    END LOOP;
END
$$;

-- sg_store_apply (store.h): admit p_token for the resource of every op,
-- run the ops all or nothing, append one audit row per op. Returns one row
-- per op, in order, with the call's result on each: o_result 0 accepted,
-- 1 stale, 2 mismatch; o_failed the index (from 0) of the op that failed,
-- o_failed_last that op's resource's last token, o_batch the batch id.
CREATE OR REPLACE FUNCTION storage_guard.sg_apply(p_token bigint, p_unfenced boolean, p_as_batch boolean, p_now bigint,
                                    p_client bytea, p_kinds int[], p_keys bytea[], p_resources bytea[],
                                    p_values text[], p_expects bigint[])
RETURNS TABLE (o_outcome int, o_last bigint, o_found bigint, o_version bigint, o_result int, o_failed int,
               o_failed_last bigint, o_batch bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int := pg_catalog.array_length(p_keys, 1);
    v_last bigint[] := pg_catalog.array_fill(0::bigint, ARRAY[n]);
    v_out int[] := pg_catalog.array_fill(3, ARRAY[n]);
    v_found bigint[] := pg_catalog.array_fill(0::bigint, ARRAY[n]);
    v_ver bigint[] := pg_catalog.array_fill(0::bigint, ARRAY[n]);
    v_result int := 0;
    v_failed int := 0;
    v_failed_last bigint := 0;
    v_batch bigint := 0;
    v_first int;
    v_name bytea;
BEGIN
    -- The locks: the fence rows, then the keys, each in byte order. One op
    -- (most calls) needs no sorting.
    IF n = 1 THEN
        v_last[1] := fencelock.lock(p_resources[1]);
        PERFORM pg_catalog.pg_advisory_xact_lock(1936159339, ('x' || pg_catalog.left(pg_catalog.md5(p_keys[1]), 8))::bit(32)::int);
    ELSE
        FOR v_name IN SELECT DISTINCT x FROM pg_catalog.unnest(p_resources) AS x ORDER BY x LOOP
            PERFORM fencelock.lock(v_name);
        END LOOP;
        FOR v_name IN SELECT DISTINCT x FROM pg_catalog.unnest(p_keys) AS x ORDER BY x LOOP
            PERFORM pg_catalog.pg_advisory_xact_lock(1936159339, ('x' || pg_catalog.left(pg_catalog.md5(v_name), 8))::bit(32)::int);
        END LOOP;
    END IF;
    -- Admit the token for every resource first: a call is either all under
    -- a current token or not at all.
    FOR i IN 1..n LOOP
        v_first := pg_catalog.array_position(p_resources, p_resources[i]);
        IF v_first < i THEN
            v_last[i] := v_last[v_first];
            CONTINUE;
        END IF;
        IF n > 1 THEN
            v_last[i] := fencelock.last(p_resources[i]);
        END IF;
        IF NOT p_unfenced AND p_token < v_last[i] THEN
            v_result := 1;
            v_failed := i - 1;
            v_failed_last := v_last[i];
            v_out := pg_catalog.array_fill(1, ARRAY[n]);
            EXIT;
        END IF;
    END LOOP;
    IF v_result = 0 THEN
        IF -1 = ALL (p_expects) THEN
            -- No precondition: nothing can fail, nothing to undo.
            SELECT o.o_outcomes, o.o_found, o.o_versions, o.o_result, o.o_failed
              INTO v_out, v_found, v_ver, v_result, v_failed
              FROM storage_guard.sg__ops(p_token, p_now, p_kinds, p_keys, p_resources, p_values, p_expects) o;
        ELSE
            -- A block with an EXCEPTION clause is a savepoint: raising
            -- undoes the ops a failed precondition stopped; the variables
            -- keep what sg__ops returned.
            BEGIN
                SELECT o.o_outcomes, o.o_found, o.o_versions, o.o_result, o.o_failed
                  INTO v_out, v_found, v_ver, v_result, v_failed
                  FROM storage_guard.sg__ops(p_token, p_now, p_kinds, p_keys, p_resources, p_values, p_expects) o;
                IF v_result = 2 THEN
                    RAISE EXCEPTION 'undo' USING ERRCODE = 'SG412';
                END IF;
            EXCEPTION WHEN SQLSTATE 'SG412' THEN
                v_out := pg_catalog.array_fill(3, ARRAY[n]);
                v_out[v_failed + 1] := 2;
                v_ver := pg_catalog.array_fill(0::bigint, ARRAY[n]);
            END;
        END IF;
    END IF;
    IF v_result = 0 AND NOT p_unfenced THEN
        -- Every row is ours (locked above): try_admit raises each fence
        -- below the token, as the check above already found it may.
        FOR v_name IN SELECT DISTINCT x FROM pg_catalog.unnest(p_resources) AS x LOOP
            PERFORM fencelock.try_admit(v_name, p_token);
        END LOOP;
    END IF;
    IF p_as_batch THEN
        v_batch := pg_catalog.nextval('storage_guard.sg_log_seq_seq');
    END IF;
    FOR i IN 1..n LOOP
        PERFORM storage_guard.sg__log(p_now, (ARRAY['write', 'delete', 'check'])[p_kinds[i]], p_keys[i], p_resources[i],
                        p_token, v_last[i], v_out[i], v_ver[i], v_batch, p_client,
                        CASE WHEN i = 1 AND v_batch > 0 THEN v_batch END);
    END LOOP;
    RETURN QUERY
        SELECT v_out[i], v_last[i], v_found[i], v_ver[i], v_result, v_failed, v_failed_last, v_batch
          FROM pg_catalog.generate_series(1, n) AS i ORDER BY i;
END
$$;

-- A fenced read (sg_store_get with a token): admit the token as a write
-- would, log it (op "read"), and return the record if admitted (o_found).
CREATE OR REPLACE FUNCTION storage_guard.sg_read(p_token bigint, p_unfenced boolean, p_now bigint, p_client bytea,
                                   p_key bytea, p_resource bytea)
RETURNS TABLE (o_outcome int, o_last bigint, o_found boolean, o_resource bytea, o_value text,
               o_token bigint, o_version bigint, o_updated_at_ms bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_last bigint := fencelock.lock(p_resource);
    v_out int := CASE WHEN p_unfenced OR p_token >= v_last THEN 0 ELSE 1 END;
BEGIN
    IF v_out = 0 AND NOT p_unfenced AND p_token > v_last THEN
        PERFORM fencelock.try_admit(p_resource, p_token);
    END IF;
    PERFORM storage_guard.sg__log(p_now, 'read', p_key, p_resource, p_token, v_last, v_out, 0, 0, p_client);
    RETURN QUERY
        SELECT v_out, v_last, r.key IS NOT NULL, r.resource, r.value, r.token, r.version, r.updated_at_ms
          FROM (SELECT 1) AS one
          LEFT JOIN storage_guard.sg_records r ON r.key = p_key AND v_out = 0;
END
$$;

-- An operator's reset of a fence (sg_store_reset_fence): set it, lower or
-- higher (0 clears it), log it (op "reset", key = resource), return the
-- old value.
CREATE OR REPLACE FUNCTION storage_guard.sg_reset(p_resource bytea, p_token bigint, p_now bigint, p_client bytea)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_old bigint := fencelock.repair(p_resource, p_token,
        'storage-guard: reset by client ' || pg_catalog.encode(p_client, 'escape'));
BEGIN
    PERFORM storage_guard.sg__log(p_now, 'reset', p_resource, p_resource, p_token, v_old, 0, 0, 0, p_client);
    RETURN v_old;
END
$$;

-- What storage-guard compares with its own number to know whether this
-- file must run (storage-guard/store_pg.c, SCHEMA_VERSION).
CREATE OR REPLACE FUNCTION storage_guard.sg_schema_version() RETURNS int
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT 2 $$;

REVOKE ALL ON ALL TABLES IN SCHEMA storage_guard FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA storage_guard FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON storage_guard.sg_records, storage_guard.sg_log, storage_guard.sg_deleted
    TO storage_guard_runner;
GRANT USAGE ON SEQUENCE storage_guard.sg_log_seq_seq TO storage_guard_runner;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA storage_guard TO storage_guard_runner;

-- Nothing in the schema belongs to another role than the installer, and
-- its tables have no trigger, rule or row security (which would run, or
-- filter, inside every request).
DO $verify$
DECLARE
    v_me oid := pg_catalog.to_regrole(current_user);
    v_ns oid := (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = 'storage_guard');
    v_what text;
BEGIN
    SELECT c.relname || ' belongs to ' || pg_catalog.pg_get_userbyid(c.relowner) INTO v_what
      FROM pg_catalog.pg_class c WHERE c.relnamespace = v_ns AND c.relowner <> v_me LIMIT 1;
    IF v_what IS NULL THEN
        SELECT p.oid::regprocedure || ' belongs to ' || pg_catalog.pg_get_userbyid(p.proowner) INTO v_what
          FROM pg_catalog.pg_proc p WHERE p.pronamespace = v_ns AND p.proowner <> v_me LIMIT 1;
    END IF;
    IF v_what IS NULL THEN
        SELECT 'a trigger, rule or row security on storage_guard.' || c.relname INTO v_what
          FROM pg_catalog.pg_class c
         WHERE c.relnamespace = v_ns
           AND (c.relrowsecurity OR c.relforcerowsecurity
                OR EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal)
                OR EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite w WHERE w.ev_class = c.oid
                            AND w.rulename <> '_RETURN')
                OR EXISTS (SELECT 1 FROM pg_catalog.pg_policy y WHERE y.polrelid = c.oid))
         LIMIT 1;
    END IF;
    -- Rights only for the roles this file grants them to (default
    -- privileges of the creating role could have given others more).
    IF v_what IS NULL THEN
        SELECT pg_catalog.pg_get_userbyid(a.grantee) || ' has ' || a.privilege_type || ' on ' || x.what INTO v_what
          FROM (SELECT c.relname::text AS what, c.relacl AS acl, c.relowner AS owner FROM pg_catalog.pg_class c
                 WHERE c.relnamespace = v_ns
                UNION ALL SELECT p.oid::regprocedure::text, p.proacl, p.proowner FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = v_ns) x, pg_catalog.aclexplode(x.acl) a
         WHERE a.grantee <> x.owner
           AND (a.grantee = 0 OR pg_catalog.pg_get_userbyid(a.grantee) NOT IN ('storage_guard_runner'))
         LIMIT 1;
    END IF;
    IF v_what IS NOT NULL THEN
        RAISE EXCEPTION 'schema.sql: % (made by someone else?): refusing it', v_what USING ERRCODE = '42501';
    END IF;
END
$verify$;
