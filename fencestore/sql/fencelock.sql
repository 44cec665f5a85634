-- fencelock's resource-side check inside PostgreSQL (15 or later), for your
-- own tables: see docs/guarding-your-database.md.
--
--   psql -1 -v ON_ERROR_STOP=1 -d mydb -f fencelock.sql   (as an installer)
--
-- A write is guarded by calling fencelock.admit() in the same transaction:
--
--   BEGIN;
--   SELECT fencelock.admit('invoice-42', 1731234567890123);
--   UPDATE invoices SET total = 130 WHERE id = 42;
--   COMMIT;
--
-- fencelock.admit() refuses a token older than the last one admitted for
-- the resource with SQLSTATE FL409, which aborts the transaction: the
-- UPDATE never commits.
--
-- Who may do what. Everything here lives in the schema fencelock and
-- belongs to the role fencelock_owner (NOLOGIN): the fence table
-- fencelock.last_token and every function. The functions run as their
-- owner (SECURITY DEFINER), so no caller needs, or gets, any right on the
-- table: a buggy or late writer cannot lower a fence by hand. Callers are
-- members of one of two roles (NOLOGIN):
--   fencelock_writer    EXECUTE on admit, try_admit, check, try_check,
--                       last and lock: guard writes;
--   fencelock_repairer  EXECUTE on repair: set a fence lower or higher,
--                       with a reason, in the audit table
--                       fencelock.repairs (an operator's step).
-- PUBLIC has nothing. Every function runs with search_path pg_catalog,
-- pg_temp and names everything else by its schema, so that no object of
-- another role (a function, an operator, a table in pg_temp) is ever
-- picked by name: with pg_catalog first an exact match there always wins,
-- functions and operators are never looked up in pg_temp, and no other
-- schema is in the path.
--
-- The installer is a superuser, or a role with CREATEROLE and CREATE on
-- the database: this file creates the three roles if they are missing,
-- the schema (owned by fencelock_owner), and its objects as
-- fencelock_owner (SET ROLE), so that any member of fencelock_owner may
-- run it again later without owning what an earlier installer made.
-- Running it again keeps every fence. libfencestore and storage-guard run
-- it themselves when the functions are missing and their role may.
--
-- The file itself runs with search_path pg_catalog, pg_temp (SET LOCAL:
-- so it must run in one transaction, psql -1; it refuses to run
-- otherwise), so that no object of another role is picked by name while
-- an installer, maybe a superuser, runs it. It refuses a schema fencelock,
-- or objects in it, that are not fencelock_owner's (made before it by
-- someone else), and any trigger, rule or policy on its tables.
--
-- Upgrading from the layout before the schema (a table
-- fencing_last_token and functions fencelock_admit, ... in a schema such
-- as public): every fence is moved into fencelock.last_token (the greater
-- where both have one), the old table and functions are dropped, and the
-- roles the old table's owner let write it become members of
-- fencelock_writer. SQL that called fencelock_admit(...) must now call
-- fencelock.admit(...): names left in a schema others may create in
-- could be shadowed by an overload. Only a table that belongs to the
-- installing role is taken over (a table of another role, maybe planted,
-- makes the install fail: make it yours with ALTER TABLE ... OWNER TO if
-- you trust it, or drop it, and run this file again; its fences are never
-- silently left behind).
--
-- Why it cannot admit two tokens out of order. Every function below first
-- locks the resource's row of the fence table (creating it with token 0
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
-- resource, 40001 and 40P01 retry the transaction, 42501 a caller that is
-- not a member of the role a function needs.

-- READ COMMITTED: the upgrade below reads the old fences after locking
-- their table, and must see what was committed before it got the lock.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SET LOCAL search_path = pg_catalog, pg_temp;

DO $install$
DECLARE
    v_owner oid;
    v_what text;
BEGIN
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.<>) 'pg_catalog, pg_temp' THEN
        RAISE EXCEPTION 'fencelock.sql must run in one transaction (psql -1), with its own search_path'
            USING ERRCODE = '55000';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencelock_owner') THEN
        CREATE ROLE fencelock_owner NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencelock_writer') THEN
        CREATE ROLE fencelock_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencelock_repairer') THEN
        CREATE ROLE fencelock_repairer NOLOGIN;
    END IF;
    v_owner := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = 'fencelock_owner');
    -- The installer acts as the owner below (a superuser may anyway).
    IF NOT pg_catalog.pg_has_role(current_user, 'fencelock_owner', 'MEMBER') THEN
        EXECUTE pg_catalog.format('GRANT fencelock_owner TO %I', current_user);
    END IF;
    -- Made once; a member of fencelock_owner reinstalls without CREATE on
    -- the database.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'fencelock') THEN
        CREATE SCHEMA fencelock AUTHORIZATION fencelock_owner;
    END IF;
    -- A schema made before this file by another role would be that role's
    -- to change (its fences to lower): refused, as is another role's
    -- right to create in it.
    SELECT 'the schema fencelock belongs to ' || pg_catalog.pg_get_userbyid(n.nspowner) INTO v_what
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'fencelock' AND n.nspowner OPERATOR(pg_catalog.<>) v_owner;
    IF v_what IS NULL THEN
        SELECT pg_catalog.pg_get_userbyid(a.grantee) || ' may create in the schema fencelock' INTO v_what
          FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
         WHERE n.nspname = 'fencelock' AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner LIMIT 1;
    END IF;
    IF v_what IS NOT NULL THEN
        RAISE EXCEPTION 'fencelock.sql: % (made by someone else?): refusing to install in it', v_what
            USING ERRCODE = '42501';
    END IF;
END
$install$;


SET ROLE fencelock_owner;

REVOKE ALL ON SCHEMA fencelock FROM PUBLIC;
GRANT USAGE ON SCHEMA fencelock TO fencelock_writer, fencelock_repairer;

CREATE TABLE IF NOT EXISTS fencelock.last_token (
    resource bytea PRIMARY KEY,
    -- 0: a row made only to be locked, no token admitted yet.
    token bigint NOT NULL
        CHECK (token OPERATOR(pg_catalog.>=) 0 AND token OPERATOR(pg_catalog.<) 9007199254740992)
);
REVOKE ALL ON fencelock.last_token FROM PUBLIC;

-- Every repair: who (the session's login role), when, which fence, from
-- what to what, and why.
CREATE TABLE IF NOT EXISTS fencelock.repairs (
    at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    by_role name NOT NULL DEFAULT session_user,
    resource bytea NOT NULL,
    old_token bigint NOT NULL,
    new_token bigint NOT NULL,
    reason text NOT NULL
);
REVOKE ALL ON fencelock.repairs FROM PUBLIC;
GRANT SELECT ON fencelock.repairs TO fencelock_repairer;

-- Lock the resource's row (FOR UPDATE, or FOR SHARE with p_share), making
-- it first if it is missing, and return its token.
CREATE OR REPLACE FUNCTION fencelock.lock_row(p_resource bytea, p_share boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_last bigint;
BEGIN
    IF p_resource IS NULL OR pg_catalog.length(p_resource) < 1 OR pg_catalog.length(p_resource) > 1024 THEN
        RAISE EXCEPTION 'fencelock: a resource must be 1..1024 bytes' USING ERRCODE = '22023';
    END IF;
    -- Bounded: each round either finds the row or inserts it; only rows
    -- deleted by hand while we wait send it round again.
    FOR i IN 1..100 LOOP
        IF p_share THEN
            SELECT t.token INTO v_last FROM fencelock.last_token t WHERE t.resource = p_resource FOR SHARE;
        ELSE
            SELECT t.token INTO v_last FROM fencelock.last_token t WHERE t.resource = p_resource FOR UPDATE;
        END IF;
        IF FOUND THEN
            RETURN v_last;
        END IF;
        INSERT INTO fencelock.last_token (resource, token) VALUES (p_resource, 0)
            ON CONFLICT (resource) DO NOTHING;
    END LOOP;
    RAISE EXCEPTION 'fencelock: the row of a resource keeps disappearing' USING ERRCODE = '40001';
END
$$;

-- The whole check, in one function (calls cost): lock the resource's row
-- FOR UPDATE (a writer) or FOR SHARE (p_share: a reader), making it first
-- if it is missing; a writer raises the last token to p_token when it is
-- newer; p_refuse refuses a stale token with SQLSTATE FL409. Returns the
-- last token before the call (0 if none).
CREATE OR REPLACE FUNCTION fencelock.admit_row(p_resource bytea, p_token bigint, p_share boolean,
                                               p_refuse boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
    -- leave making it to lock_row.
    IF p_share THEN
        SELECT t.token INTO v_last FROM fencelock.last_token t WHERE t.resource = p_resource FOR SHARE;
    ELSE
        SELECT t.token INTO v_last FROM fencelock.last_token t WHERE t.resource = p_resource FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        v_last := fencelock.lock_row(p_resource, p_share);
    END IF;
    IF p_token > v_last AND NOT p_share THEN
        UPDATE fencelock.last_token t SET token = p_token WHERE t.resource = p_resource;
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
CREATE OR REPLACE FUNCTION fencelock.admit(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(p_resource, p_token, false, true) $$;

-- The same without refusing: a result greater than p_token means the token
-- was stale and nothing was raised; the caller decides (storage-guard, or
-- fencestore_admit, commits an audit row then).
CREATE OR REPLACE FUNCTION fencelock.try_admit(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(p_resource, p_token, false, false) $$;

-- A reader's check, for the holder of a read lock: refuse (FL409) if a
-- token newer than p_token was admitted for the resource; never raises
-- the fence: a reader's token is not a new token (docs/fencing.md). The
-- row is locked FOR SHARE until the transaction ends, so no writer admits
-- a newer token while the reader reads on; readers do not block each other.
CREATE OR REPLACE FUNCTION fencelock.check(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(p_resource, p_token, true, true) $$;

-- The reader's check without refusing: the last token (0 if none); the
-- read is fenced out when it is greater than p_token.
CREATE OR REPLACE FUNCTION fencelock.try_check(p_resource bytea, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(p_resource, p_token, true, false) $$;

-- The last admitted token of a resource (0 if none), without a lock.
CREATE OR REPLACE FUNCTION fencelock.last(p_resource bytea) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT COALESCE((SELECT t.token FROM fencelock.last_token t WHERE t.resource = p_resource), 0)
$$;

-- Lock the resource's row FOR UPDATE (making it if missing) and return its
-- last token, without admitting anything: for a caller that locks several
-- resources in one order before it admits (storage-guard's batches).
CREATE OR REPLACE FUNCTION fencelock.lock(p_resource bytea) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.lock_row(p_resource, false) $$;

-- An operator's repair (docs/guarding-your-database.md, "Repairing a
-- fence"): set the resource's fence to p_token, lower or higher (0 clears
-- it), with a reason, written to fencelock.repairs with who did it.
-- Returns the fence before. DANGEROUS as lowering any fence is: a token
-- above p_token may be admitted again. Only for members of
-- fencelock_repairer.
CREATE OR REPLACE FUNCTION fencelock.repair(p_resource bytea, p_token bigint, p_reason text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_old bigint;
BEGIN
    IF p_token IS NULL OR p_token < 0 OR p_token >= 9007199254740992 THEN
        RAISE EXCEPTION 'fencelock: token % is not in 0 .. 2^53-1', p_token USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '[[:alnum:]]' THEN
        RAISE EXCEPTION 'fencelock: a repair needs a reason' USING ERRCODE = '22023';
    END IF;
    v_old := fencelock.lock_row(p_resource, false);
    UPDATE fencelock.last_token t SET token = p_token WHERE t.resource = p_resource;
    INSERT INTO fencelock.repairs (resource, old_token, new_token, reason)
        VALUES (p_resource, v_old, p_token, p_reason);
    RETURN v_old;
END
$$;

-- The same with the resource as text: its UTF-8 bytes.
CREATE OR REPLACE FUNCTION fencelock.admit(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name), p_token, false, true) $$;
CREATE OR REPLACE FUNCTION fencelock.try_admit(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name), p_token, false, false) $$;
CREATE OR REPLACE FUNCTION fencelock.check(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name), p_token, true, true) $$;
CREATE OR REPLACE FUNCTION fencelock.try_check(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.admit_row(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name), p_token, true, false) $$;
CREATE OR REPLACE FUNCTION fencelock.last(p_resource text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.last(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name)) $$;
CREATE OR REPLACE FUNCTION fencelock.repair(p_resource text, p_token bigint, p_reason text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT fencelock.repair(pg_catalog.convert_to(p_resource, 'UTF8'::pg_catalog.name), p_token, p_reason) $$;

-- Nobody but the roles below runs any of them (CREATE FUNCTION grants
-- EXECUTE to PUBLIC).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA fencelock FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencelock.admit(bytea, bigint), fencelock.admit(text, bigint),
    fencelock.try_admit(bytea, bigint), fencelock.try_admit(text, bigint),
    fencelock.check(bytea, bigint), fencelock.check(text, bigint),
    fencelock.try_check(bytea, bigint), fencelock.try_check(text, bigint),
    fencelock.last(bytea), fencelock.last(text), fencelock.lock(bytea)
    TO fencelock_writer;
GRANT EXECUTE ON FUNCTION fencelock.repair(bytea, bigint, text), fencelock.repair(text, bigint, text),
    fencelock.last(bytea), fencelock.last(text)
    TO fencelock_repairer;

RESET ROLE;

-- Upgrading from the layout before the schema: see the top of this file.
-- Only tables of the installing role are taken over.
DO $upgrade$
DECLARE
    v_old regclass;
    v_ns oid;
    v_grantee name;
    v_proc regprocedure;
BEGIN
    FOR v_old, v_ns IN
        SELECT c.oid::regclass, c.relnamespace FROM pg_catalog.pg_class c
         WHERE c.relname = 'fencing_last_token' AND c.relkind = 'r' AND c.relpersistence = 'p'
           AND c.relowner = pg_catalog.to_regrole(current_user)
    LOOP
        -- Nothing may admit against the old table while its fences move.
        EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_old);
        EXECUTE pg_catalog.format(
            'INSERT INTO fencelock.last_token AS t (resource, token) SELECT o.resource, o.token FROM %s o '
            'ON CONFLICT (resource) DO UPDATE SET token = GREATEST(t.token, excluded.token)', v_old);
        -- Those the owner let write the old fences guard writes as before.
        FOR v_grantee IN
            SELECT DISTINCT pg_catalog.pg_get_userbyid(a.grantee) FROM pg_catalog.pg_class c,
                   pg_catalog.aclexplode(c.relacl) a
             WHERE c.oid = v_old AND a.privilege_type IN ('UPDATE', 'INSERT') AND a.grantee <> 0
               AND a.grantee <> c.relowner
        LOOP
            EXECUTE pg_catalog.format('GRANT fencelock_writer TO %I', v_grantee);
        END LOOP;
        FOR v_proc IN
            SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = v_ns AND p.proowner = pg_catalog.to_regrole(current_user)
               AND p.proname IN ('fencelock__lock', 'fencelock__admit', 'fencelock_admit', 'fencelock_try_admit',
                                 'fencelock_check', 'fencelock_try_check', 'fencelock_last')
        LOOP
            EXECUTE pg_catalog.format('DROP FUNCTION %s', v_proc);
        END LOOP;
        EXECUTE pg_catalog.format('DROP TABLE %s', v_old);
        RAISE NOTICE 'fencelock.sql: the fences of % moved into fencelock.last_token; call fencelock.admit(...) '
            'and the others by their new names', v_old;
    END LOOP;
    -- Another role's: maybe planted, maybe the fences of an install made
    -- by an application role. Neither adopted nor left behind unsaid (its
    -- fences would be lost): the install fails until someone decides.
    FOR v_old IN
        SELECT c.oid::regclass FROM pg_catalog.pg_class c
         WHERE c.relname = 'fencing_last_token' AND c.relkind = 'r' AND c.relpersistence = 'p'
           AND c.relowner <> pg_catalog.to_regrole(current_user)
    LOOP
        RAISE EXCEPTION 'fencelock.sql: % (the layout before the schema) belongs to another role: if it is '
            'fencelock''s, make it yours (ALTER TABLE ... OWNER TO) and run this file again, else drop it', v_old
            USING ERRCODE = '42501';
    END LOOP;
END
$upgrade$;

-- Nothing in the schema belongs to anyone but fencelock_owner, and its
-- tables have no trigger, rule or row security (which would run, or
-- filter, inside every call).
DO $verify$
DECLARE
    v_owner oid := pg_catalog.to_regrole('fencelock_owner');
    v_ns oid := (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = 'fencelock');
    v_what text;
BEGIN
    SELECT c.relname || ' belongs to ' || pg_catalog.pg_get_userbyid(c.relowner) INTO v_what
      FROM pg_catalog.pg_class c WHERE c.relnamespace = v_ns AND c.relowner <> v_owner LIMIT 1;
    IF v_what IS NULL THEN
        SELECT p.oid::regprocedure || ' belongs to ' || pg_catalog.pg_get_userbyid(p.proowner) INTO v_what
          FROM pg_catalog.pg_proc p WHERE p.pronamespace = v_ns AND p.proowner <> v_owner LIMIT 1;
    END IF;
    IF v_what IS NULL THEN
        SELECT 'a trigger, rule or row security on fencelock.' || c.relname INTO v_what FROM pg_catalog.pg_class c
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
           AND (a.grantee = 0 OR pg_catalog.pg_get_userbyid(a.grantee) NOT IN ('fencelock_writer', 'fencelock_repairer'))
         LIMIT 1;
    END IF;
    IF v_what IS NOT NULL THEN
        RAISE EXCEPTION 'fencelock.sql: % (made by someone else?): refusing it', v_what USING ERRCODE = '42501';
    END IF;
END
$verify$;
