import { randomUUID } from "node:crypto";
import { PGlite } from "@electric-sql/pglite";
import { pgliteThread } from "../../src/config/config.ts";
import { createPgliteDb, createPostgresDb, pgliteDb, type Db } from "../../src/storage/db.ts";
import { PGLITE_EXTENSIONS } from "../../src/storage/pglite-extensions.ts";
import { migrate } from "../../src/storage/migrate.ts";

/** The PostgreSQL server the suite runs against, when it runs on PostgreSQL rather than PGlite. */
export const TEST_DATABASE_URL = process.env.RUDDER_TEST_DATABASE_URL;
export const TEST_DRIVER: Db["driver"] = TEST_DATABASE_URL ? "postgres" : "pglite";

export interface TestDatabase {
  /** Connection string of a private PostgreSQL database, or undefined on PGlite (in memory). */
  readonly url: string | undefined;
  readonly db: Db;
  drop(): Promise<void>;
}

/**
 * A private, empty database for one test: an in-memory PGlite, or a fresh database on the test
 * PostgreSQL server (dropped afterwards). Migrated unless `migrated: false`.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  let url: string | undefined;
  let db: Db;
  if (TEST_DATABASE_URL) {
    const name = `rudder_test_${randomUUID().replaceAll("-", "")}`;
    const admin = createPostgresDb(TEST_DATABASE_URL, { max: 1 });
    await admin.query(`create database ${name}`);
    await admin.close();
    const parsed = new URL(TEST_DATABASE_URL);
    parsed.pathname = `/${name}`;
    url = parsed.toString();
    db = createPostgresDb(url);
    const drop = async () => {
      await db.close();
      const cleanup = createPostgresDb(TEST_DATABASE_URL!, { max: 1 });
      await cleanup.query(`drop database if exists ${name} with (force)`);
      await cleanup.close();
    };
    if (options.migrated !== false) await migrate(db);
    return { url, db, drop };
  }
  // As `rudder dev` does: PGlite on its worker thread, or with RUDDER_PGLITE_THREAD=main on this one.
  db = await createPgliteDb({ loadDataDir: await pgliteTemplate(options.migrated !== false), thread: pgliteThread() });
  return { url, db, drop: () => db.close() };
}

const templates = new Map<boolean, Promise<Blob>>();

/**
 * A PGlite data directory made once per test process (blank, or migrated) and loaded by every
 * test database: initdb costs seconds on PGlite, loading a dump well under one.
 */
function pgliteTemplate(migrated: boolean): Promise<Blob> {
  let template = templates.get(migrated);
  if (!template) {
    template = (async () => {
      const lite = await PGlite.create({ extensions: PGLITE_EXTENSIONS });
      if (migrated) await migrate(pgliteDb(lite));
      const dump = await lite.dumpDataDir("none");
      await lite.close();
      return dump;
    })();
    templates.set(migrated, template);
  }
  return template;
}
