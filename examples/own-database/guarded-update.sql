-- A guarded write to your own table from psql: the fencing check of
-- fencelock.sql and the write commit together, or neither does.
--
--   psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate -d "$DB" \
--        -v resource=invoice-42 -v token=1731234567890123 -v key=invoice-42 -v value=paid \
--        -f guarded-update.sql
--
-- Exit status 0: written. 3 with "ERROR:  FL409" on stderr: refused, the
-- token is older than the last one admitted for the resource (a newer
-- holder has written); nothing was written. The table:
--   CREATE TABLE records (key text PRIMARY KEY, value text NOT NULL);
BEGIN;
SELECT fencelock.admit(:'resource', :token) AS previous_token \gset
UPDATE records SET value = :'value' WHERE key = :'key';
COMMIT;
