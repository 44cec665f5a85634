-- storage-guard's records, audit log and fenced operations in PostgreSQL
-- (storage-guard --db postgresql://...; docs/storage-guard.md). Run by
-- storage-guard itself, after fencelock.sql, in one transaction, when
-- sg_schema_version() is missing or older; safe to run again.
--
-- Each request is one call of a function below, one statement and so one
-- transaction on one round trip: a storage-guard process that pauses or
-- dies never holds a lock between two statements. The functions run at
-- READ COMMITTED (storage-guard sets it), where every statement after a
-- lock sees what the lock's previous holder committed.
--
-- Locks, taken first and always in the same order, so that two
-- storage-guard transactions never wait for each other in a cycle:
--   1. the fence rows of the call's resources (fencelock__lock, FOR
--      UPDATE), in byte order: writers of one resource take turns, and the
--      admission and the audit row of each are made under its row lock, so
--      per resource the log's seq order is the commit order;
--   2. one transaction-level advisory lock per key (class 1936159339, 'sgrk'),
--      in byte order: the version preconditions of two writes of one key
--      under different resources cannot both pass on the same version.
-- A refused or failed-precondition call writes its audit rows only.

CREATE TABLE IF NOT EXISTS sg_records (
    key bytea PRIMARY KEY,
    resource bytea NOT NULL,
    value text NOT NULL,
    token bigint NOT NULL,
    version bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);

-- The log keeps refused writes too, so a replay can see what was turned away.
CREATE TABLE IF NOT EXISTS sg_log (
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
CREATE INDEX IF NOT EXISTS sg_log_by_resource ON sg_log (resource, seq);
CREATE INDEX IF NOT EXISTS sg_log_by_key ON sg_log (key, seq);

-- The last version of each deleted key, so that a new record goes on from
-- it: an If-Match taken before a delete can never match its successor.
CREATE TABLE IF NOT EXISTS sg_deleted (
    key bytea PRIMARY KEY,
    version bigint NOT NULL
);

-- Outcomes are passed as numbers, those of enum sg_outcome (store.h), and
-- logged by name.
CREATE OR REPLACE FUNCTION sg__outcome(p_outcome int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT (ARRAY['accepted', 'stale', 'mismatch', 'aborted', 'not_found'])[p_outcome + 1]
$$;

-- PL/pgSQL, not SQL: its INSERT is planned once per session, where an SQL
-- function called from PERFORM plans its body on every call.
CREATE OR REPLACE FUNCTION sg__log(p_now bigint, p_op text, p_key bytea, p_resource bytea, p_token bigint,
                                   p_last bigint, p_outcome int, p_version bigint, p_batch bigint,
                                   p_client bytea, p_seq bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sg_log (seq, time_ms, op, key, resource, token, last_token, outcome, version, batch, client)
    VALUES (COALESCE(p_seq, nextval('sg_log_seq_seq')), p_now, p_op, p_key, p_resource, p_token, p_last,
            sg__outcome(p_outcome), CASE WHEN p_outcome = 0 THEN p_version ELSE 0 END, p_batch, p_client);
END
$$;

-- The ops of a call, in order, each checking its precondition (p_expects:
-- a version >= 1, 0 "no record", -1 none, -2 "a record exists") against
-- the record as the ops before it left it. Stops at the first that fails
-- (o_result 2, o_failed its index from 0), having written the ops before
-- it: the caller undoes them. Kinds: 1 put, 2 delete, 3 check.
CREATE OR REPLACE FUNCTION sg__ops(p_token bigint, p_now bigint, p_kinds int[], p_keys bytea[],
                                   p_resources bytea[], p_values text[], p_expects bigint[],
                                   OUT o_outcomes int[], OUT o_found bigint[], OUT o_versions bigint[],
                                   OUT o_result int, OUT o_failed int)
LANGUAGE plpgsql AS $$
DECLARE
    n int := array_length(p_keys, 1);
    v_found bigint;
    v_new bigint;
BEGIN
    o_outcomes := array_fill(3, ARRAY[n]);
    o_found := array_fill(0::bigint, ARRAY[n]);
    o_versions := array_fill(0::bigint, ARRAY[n]);
    o_result := 0;
    o_failed := 0;
    FOR i IN 1..n LOOP
        v_found := COALESCE((SELECT r.version FROM sg_records r WHERE r.key = p_keys[i]), 0);
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
            INSERT INTO sg_records AS r (key, resource, value, token, version, updated_at_ms)
            VALUES (p_keys[i], p_resources[i], p_values[i], p_token,
                    1 + COALESCE((SELECT d.version FROM sg_deleted d WHERE d.key = p_keys[i]), 0), p_now)
            ON CONFLICT (key) DO UPDATE SET resource = excluded.resource, value = excluded.value,
                token = excluded.token, version = r.version + 1, updated_at_ms = excluded.updated_at_ms
            RETURNING r.version INTO v_new;
            o_versions[i] := v_new;
            IF v_found = 0 THEN
                DELETE FROM sg_deleted d WHERE d.key = p_keys[i];
            END IF;
        ELSIF p_kinds[i] = 2 THEN
            IF v_found = 0 THEN
                o_outcomes[i] := 4;
            ELSE
                DELETE FROM sg_records r WHERE r.key = p_keys[i];
                INSERT INTO sg_deleted AS d (key, version) VALUES (p_keys[i], v_found)
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
CREATE OR REPLACE FUNCTION sg_apply(p_token bigint, p_unfenced boolean, p_as_batch boolean, p_now bigint,
                                    p_client bytea, p_kinds int[], p_keys bytea[], p_resources bytea[],
                                    p_values text[], p_expects bigint[])
RETURNS TABLE (o_outcome int, o_last bigint, o_found bigint, o_version bigint, o_result int, o_failed int,
               o_failed_last bigint, o_batch bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n int := array_length(p_keys, 1);
    v_last bigint[] := array_fill(0::bigint, ARRAY[n]);
    v_out int[] := array_fill(3, ARRAY[n]);
    v_found bigint[] := array_fill(0::bigint, ARRAY[n]);
    v_ver bigint[] := array_fill(0::bigint, ARRAY[n]);
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
        v_last[1] := fencelock__lock(p_resources[1], false);
        PERFORM pg_advisory_xact_lock(1936159339, ('x' || left(md5(p_keys[1]), 8))::bit(32)::int);
    ELSE
        FOR v_name IN SELECT DISTINCT x FROM unnest(p_resources) AS x ORDER BY x LOOP
            PERFORM fencelock__lock(v_name, false);
        END LOOP;
        FOR v_name IN SELECT DISTINCT x FROM unnest(p_keys) AS x ORDER BY x LOOP
            PERFORM pg_advisory_xact_lock(1936159339, ('x' || left(md5(v_name), 8))::bit(32)::int);
        END LOOP;
    END IF;
    -- Admit the token for every resource first: a call is either all under
    -- a current token or not at all.
    FOR i IN 1..n LOOP
        v_first := array_position(p_resources, p_resources[i]);
        IF v_first < i THEN
            v_last[i] := v_last[v_first];
            CONTINUE;
        END IF;
        IF n > 1 THEN
            v_last[i] := (SELECT f.token FROM fencing_last_token f WHERE f.resource = p_resources[i]);
        END IF;
        IF NOT p_unfenced AND p_token < v_last[i] THEN
            v_result := 1;
            v_failed := i - 1;
            v_failed_last := v_last[i];
            v_out := array_fill(1, ARRAY[n]);
            EXIT;
        END IF;
    END LOOP;
    IF v_result = 0 THEN
        IF -1 = ALL (p_expects) THEN
            -- No precondition: nothing can fail, nothing to undo.
            SELECT o.o_outcomes, o.o_found, o.o_versions, o.o_result, o.o_failed
              INTO v_out, v_found, v_ver, v_result, v_failed
              FROM sg__ops(p_token, p_now, p_kinds, p_keys, p_resources, p_values, p_expects) o;
        ELSE
            -- A block with an EXCEPTION clause is a savepoint: raising
            -- undoes the ops a failed precondition stopped; the variables
            -- keep what sg__ops returned.
            BEGIN
                SELECT o.o_outcomes, o.o_found, o.o_versions, o.o_result, o.o_failed
                  INTO v_out, v_found, v_ver, v_result, v_failed
                  FROM sg__ops(p_token, p_now, p_kinds, p_keys, p_resources, p_values, p_expects) o;
                IF v_result = 2 THEN
                    RAISE EXCEPTION 'undo' USING ERRCODE = 'SG412';
                END IF;
            EXCEPTION WHEN SQLSTATE 'SG412' THEN
                v_out := array_fill(3, ARRAY[n]);
                v_out[v_failed + 1] := 2;
                v_ver := array_fill(0::bigint, ARRAY[n]);
            END;
        END IF;
    END IF;
    IF v_result = 0 AND NOT p_unfenced THEN
        UPDATE fencing_last_token f SET token = p_token
         WHERE f.resource = ANY (p_resources) AND f.token < p_token;
    END IF;
    IF p_as_batch THEN
        v_batch := nextval('sg_log_seq_seq');
    END IF;
    FOR i IN 1..n LOOP
        PERFORM sg__log(p_now, (ARRAY['write', 'delete', 'check'])[p_kinds[i]], p_keys[i], p_resources[i],
                        p_token, v_last[i], v_out[i], v_ver[i], v_batch, p_client,
                        CASE WHEN i = 1 AND v_batch > 0 THEN v_batch END);
    END LOOP;
    RETURN QUERY
        SELECT v_out[i], v_last[i], v_found[i], v_ver[i], v_result, v_failed, v_failed_last, v_batch
          FROM generate_series(1, n) AS i ORDER BY i;
END
$$;

-- A fenced read (sg_store_get with a token): admit the token as a write
-- would, log it (op "read"), and return the record if admitted (o_found).
CREATE OR REPLACE FUNCTION sg_read(p_token bigint, p_unfenced boolean, p_now bigint, p_client bytea,
                                   p_key bytea, p_resource bytea)
RETURNS TABLE (o_outcome int, o_last bigint, o_found boolean, o_resource bytea, o_value text,
               o_token bigint, o_version bigint, o_updated_at_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint := fencelock__lock(p_resource, false);
    v_out int := CASE WHEN p_unfenced OR p_token >= v_last THEN 0 ELSE 1 END;
BEGIN
    IF v_out = 0 AND NOT p_unfenced AND p_token > v_last THEN
        UPDATE fencing_last_token f SET token = p_token WHERE f.resource = p_resource;
    END IF;
    PERFORM sg__log(p_now, 'read', p_key, p_resource, p_token, v_last, v_out, 0, 0, p_client);
    RETURN QUERY
        SELECT v_out, v_last, r.key IS NOT NULL, r.resource, r.value, r.token, r.version, r.updated_at_ms
          FROM (SELECT 1) AS one
          LEFT JOIN sg_records r ON r.key = p_key AND v_out = 0;
END
$$;

-- An operator's reset of a fence (sg_store_reset_fence): set it, lower or
-- higher (0 clears it), log it (op "reset", key = resource), return the
-- old value.
CREATE OR REPLACE FUNCTION sg_reset(p_resource bytea, p_token bigint, p_now bigint, p_client bytea)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_old bigint := fencelock__lock(p_resource, false);
BEGIN
    UPDATE fencing_last_token f SET token = p_token WHERE f.resource = p_resource;
    PERFORM sg__log(p_now, 'reset', p_resource, p_resource, p_token, v_old, 0, 0, 0, p_client);
    RETURN v_old;
END
$$;

-- What storage-guard compares with its own number to know whether this
-- file must run (storage-guard/store_pg.c, SCHEMA_VERSION).
CREATE OR REPLACE FUNCTION sg_schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;
