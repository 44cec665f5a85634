-- fencelock's resource-side check inside PostgreSQL (15 or later), for your
-- own tables: see docs/guarding-your-database.md.
--
--   psql -v ON_ERROR_STOP=1 -d mydb -f fencelock.sql
--
-- Creates, in the first schema of the search_path, the table
-- fencing_last_token and the functions below. Running it again is safe (it
-- replaces the functions and keeps the table); libfencestore runs it itself
-- when it finds the functions missing.
--
-- A write is guarded by calling fencelock_admit() in the same transaction:
--
--   BEGIN;
--   SELECT fencelock_admit('invoice-42', 1731234567890123);
--   UPDATE invoices SET total = 130 WHERE id = 42;
--   COMMIT;
--
-- fencelock_admit() refuses a token older than the last one admitted for
-- the resource with SQLSTATE FL409, which aborts the transaction: the
-- UPDATE never commits.
--
-- Why it cannot admit two tokens out of order. Every function below first
-- locks the resource's row of fencing_last_token (creating it with token 0
-- when missing): FOR UPDATE for a writer, FOR SHARE for a reader's check.
-- The row lock is held until the transaction ends, so two writers of one
-- resource are serialized for the rest of their transactions, and the
-- second one decides on the first one's outcome:
--   * READ COMMITTED: a SELECT ... FOR UPDATE that waited for another
--     writer reads the row as that writer committed it (or as it was, if it
--     rolled back), and every later statement of the function runs on a
--     new snapshot taken after the lock was granted.
--   * REPEATABLE READ and SERIALIZABLE: a writer whose snapshot is older
--     than the row's last committed change is refused by PostgreSQL itself
--     with SQLSTATE 40001 (could not serialize access due to concurrent
--     update) when it locks the row; it never decides on an old token.
--     Retry the whole transaction, as with any serialization failure.
-- Two writers that each created the missing row meet in the primary key:
-- the second waits for the first and then finds the row (or, at REPEATABLE
-- READ and above, fails with 40001).
-- So the admitted tokens of a resource, in commit order, never decrease,
-- and the caller's own write commits or rolls back with its admission.
--
-- Resources are bytes (bytea, 1..1024 bytes); the text versions take the
-- UTF-8 bytes of the text, so 'invoice-42' is the same resource here, in
-- storage-guard and in fencestore. Tokens are 1 .. 2^53-1 (see
-- docs/fencing.md); 0 and NULL mean "no token".
--
-- SQLSTATEs: FL409 stale token, FL428 no token, 22023 a bad token or
-- resource, 40001 and 40P01 retry the transaction.

CREATE TABLE IF NOT EXISTS fencing_last_token (
    resource bytea PRIMARY KEY,
    -- 0: a row made only to be locked, no token admitted yet.
    token bigint NOT NULL CHECK (token >= 0 AND token < 9007199254740992)
);

-- Lock the resource's row (FOR UPDATE, or FOR SHARE with p_share), making
-- it first if it is missing, and return its token. Internal: call the
-- functions below (storage-guard calls this one to lock before it admits).
CREATE OR REPLACE FUNCTION fencelock__lock(p_resource bytea, p_share boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
BEGIN
    IF p_resource IS NULL OR length(p_resource) < 1 OR length(p_resource) > 1024 THEN
        RAISE EXCEPTION 'fencelock: a resource must be 1..1024 bytes' USING ERRCODE = '22023';
    END IF;
    -- Bounded: each round either finds the row or inserts it; only rows
    -- deleted by hand while we wait send it round again.
    FOR i IN 1..100 LOOP
        IF p_share THEN
            SELECT token INTO v_last FROM fencing_last_token WHERE resource = p_resource FOR SHARE;
        ELSE
            SELECT token INTO v_last FROM fencing_last_token WHERE resource = p_resource FOR UPDATE;
        END IF;
        IF FOUND THEN
            RETURN v_last;
        END IF;
        INSERT INTO fencing_last_token (resource, token) VALUES (p_resource, 0)
            ON CONFLICT (resource) DO NOTHING;
    END LOOP;
    RAISE EXCEPTION 'fencelock: the row of a resource keeps disappearing' USING ERRCODE = '40001';
END
$$;

-- The whole check, in one function (calls cost): lock the resource's row
-- FOR UPDATE (a writer) or FOR SHARE (p_share: a reader), making it first
-- if it is missing; a writer raises the last token to p_token when it is
-- newer; p_refuse refuses a stale token with SQLSTATE FL409. Returns the
-- last token before the call (0 if none). Internal: call the functions
-- below.
CREATE OR REPLACE FUNCTION fencelock__admit(p_resource bytea, p_token bigint, p_share boolean,
                                            p_refuse boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
BEGIN
    IF p_token IS NULL OR p_token = 0 THEN
        RAISE EXCEPTION 'fencelock: no token (0 or NULL)' USING ERRCODE = 'FL428';
    END IF;
    IF p_token < 0 OR p_token >= 9007199254740992 THEN
        RAISE EXCEPTION 'fencelock: token % is not in 1 .. 2^53-1', p_token USING ERRCODE = '22023';
    END IF;
    -- The row is there but for a resource's first use: lock it here, and
    -- leave making it to fencelock__lock.
    IF p_share THEN
        SELECT token INTO v_last FROM fencing_last_token WHERE resource = p_resource FOR SHARE;
    ELSE
        SELECT token INTO v_last FROM fencing_last_token WHERE resource = p_resource FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        v_last := fencelock__lock(p_resource, p_share);
    END IF;
    IF p_token > v_last AND NOT p_share THEN
        UPDATE fencing_last_token SET token = p_token WHERE resource = p_resource;
    ELSIF p_token < v_last AND p_refuse THEN
        RAISE EXCEPTION 'fencelock: token % is older than %, the last one admitted for this resource',
            p_token, v_last USING ERRCODE = 'FL409';
    END IF;
    RETURN v_last;
END
$$;

-- Admit p_token for the resource if it is not older than the last one
-- admitted (raising the last one when it is newer), and refuse a stale one
-- with SQLSTATE FL409, which aborts the caller's transaction. Returns the
-- last token before the call (0 if none). The row stays locked until the
-- transaction ends.
CREATE OR REPLACE FUNCTION fencelock_admit(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(p_resource, p_token, false, true) $$;

-- The same without refusing: a result greater than p_token means the token
-- was stale and nothing was raised; the caller decides (storage-guard, or
-- fencestore_admit, commits an audit row then).
CREATE OR REPLACE FUNCTION fencelock_try_admit(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(p_resource, p_token, false, false) $$;

-- A reader's check, for the holder of a read lock: refuse (FL409) if a
-- token newer than p_token was admitted for the resource; never raises
-- the fence: a reader's token is not a new token (docs/fencing.md). The
-- row is locked FOR SHARE until the transaction ends, so no writer admits
-- a newer token while the reader reads on; readers do not block each other.
CREATE OR REPLACE FUNCTION fencelock_check(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(p_resource, p_token, true, true) $$;

-- The reader's check without refusing: the last token (0 if none); the
-- read is fenced out when it is greater than p_token.
CREATE OR REPLACE FUNCTION fencelock_try_check(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(p_resource, p_token, true, false) $$;

-- The last admitted token of a resource (0 if none), without a lock.
CREATE OR REPLACE FUNCTION fencelock_last(p_resource bytea) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT token FROM fencing_last_token WHERE resource = p_resource), 0)
$$;

-- The same with the resource as text: its UTF-8 bytes.
CREATE OR REPLACE FUNCTION fencelock_admit(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(convert_to(p_resource, 'UTF8'), p_token, false, true) $$;
CREATE OR REPLACE FUNCTION fencelock_try_admit(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(convert_to(p_resource, 'UTF8'), p_token, false, false) $$;
CREATE OR REPLACE FUNCTION fencelock_check(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(convert_to(p_resource, 'UTF8'), p_token, true, true) $$;
CREATE OR REPLACE FUNCTION fencelock_try_check(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT fencelock__admit(convert_to(p_resource, 'UTF8'), p_token, true, false) $$;
CREATE OR REPLACE FUNCTION fencelock_last(p_resource text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT fencelock_last(convert_to(p_resource, 'UTF8')) $$;
