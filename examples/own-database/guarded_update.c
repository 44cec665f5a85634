/*
 * guarded_update: write a record of your own table under a fencing token,
 * in SQLite or PostgreSQL, whichever the connection string names; the same
 * fencestore calls for both (docs/guarding-your-database.md).
 *
 *   guarded_update CONN RESOURCE TOKEN KEY VALUE
 *
 * CONN is an SQLite file or a postgresql:// URI. The table records (key
 * TEXT PRIMARY KEY, value TEXT NOT NULL) is created if missing. Exit
 * status: 0 written; 3 refused, the token is stale (nothing written);
 * 1 failed; 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fencestore/fencestore.h>
#include <libpq-fe.h>
#include <sqlite3.h>

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, value TEXT NOT NULL)";

static int create_table(fencestore *fs)
{
    if (fencestore_backend(fs) == FENCESTORE_SQLITE)
        return sqlite3_exec(fencestore_db(fs), create_sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
    /* Quietly: an existing table is no news. */
    PGresult *r = PQexec(fencestore_db(fs), "SET client_min_messages = warning");
    PQclear(r);
    r = PQexec(fencestore_db(fs), create_sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok ? 0 : -EIO;
}

/* Your own statement, on the store's connection; each database has its
 * own client library and parameter syntax ($1 or ?1). */
static int own_write(fencestore *fs, const char *key, const char *value)
{
    if (fencestore_backend(fs) == FENCESTORE_POSTGRESQL) {
        const char *vals[2] = {key, value};
        PGresult *r = PQexecParams(fencestore_db(fs),
                                   "INSERT INTO records (key, value) VALUES ($1, $2)"
                                   " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                                   2, NULL, vals, NULL, NULL, 0);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            fprintf(stderr, "guarded_update: %s", PQerrorMessage(fencestore_db(fs)));
        PQclear(r);
        return ok ? 0 : -EIO;
    }
    sqlite3 *db = fencestore_db(fs);
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_prepare_v2(db,
                                "INSERT INTO records (key, value) VALUES (?1, ?2)"
                                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                                -1, &st, NULL) == SQLITE_OK &&
             sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC) == SQLITE_OK &&
             sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_DONE;
    if (!ok)
        fprintf(stderr, "guarded_update: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return ok ? 0 : -EIO;
}

/* The check and the write in one transaction: both commit, or neither. */
static int guarded_write(fencestore *fs, const char *resource, uint64_t token, const char *key,
                         const char *value)
{
    int rc = fencestore_begin(fs);
    if (rc != 0)
        return rc;
    uint64_t last = 0;
    rc = fencestore_admit(fs, resource, strlen(resource), token, &last);
    if (rc == FENCING_ESTALE)
        fprintf(stderr,
                "guarded_update: refused: token %llu is older than %llu, the last one admitted for %s\n",
                (unsigned long long)token, (unsigned long long)last, resource);
    else if (rc != 0 && rc != -EAGAIN)
        fprintf(stderr, "guarded_update: %s\n", fencestore_errmsg(fs));
    if (rc == 0)
        rc = own_write(fs, key, value);
    if (rc == 0 && (rc = fencestore_commit(fs)) != 0 && rc != -EAGAIN)
        fprintf(stderr, "guarded_update: commit: %s\n", fencestore_errmsg(fs));
    if (rc != 0)
        fencestore_rollback(fs);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: guarded_update CONN RESOURCE TOKEN KEY VALUE\n");
        return 2;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long token = strtoull(argv[3], &end, 10);
    if (errno != 0 || end == argv[3] || *end != '\0') {
        fprintf(stderr, "guarded_update: TOKEN must be a number\n");
        return 2;
    }
    fencestore *fs = NULL;
    char err[512];
    if (fencestore_open(argv[1], &fs, err, sizeof(err)) != 0) {
        fprintf(stderr, "guarded_update: %s\n", err);
        return 1;
    }
    int rc = create_table(fs);
    /* A serialization failure or a busy database asks for the whole
     * transaction again. */
    for (int attempt = 0; rc == 0 && attempt < 5; attempt++)
        if ((rc = guarded_write(fs, argv[2], token, argv[4], argv[5])) != -EAGAIN)
            break;
    fencestore_free(fs);
    return rc == 0 ? 0 : rc == FENCING_ESTALE ? 3 : 1;
}
