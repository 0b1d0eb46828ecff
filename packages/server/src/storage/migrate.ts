import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Db } from "./db.ts";

export interface Migration {
  readonly id: number;
  readonly name: string;
  readonly sql: string;
}

export interface MigrationStatus {
  readonly current: number;
  readonly latest: number;
  readonly applied: readonly { id: number; name: string; applied_at: string }[];
  readonly pending: readonly Migration[];
}

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));

/** The migration chain shipped with this binary, in order. Files are `NNNNNN_name.sql`. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{6}_[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      id: Number(file.slice(0, 6)),
      name: file.slice(7, -4),
      sql: readFileSync(dir + file, "utf8"),
    }));
}

/** Thrown for a migration request that can never succeed (a downgrade, an unknown target). */
export class MigrationError extends Error {
  override readonly name = "MigrationError";
}

const CREATE_LEDGER = `create table if not exists rudder_migrations (
  id integer primary key,
  name text not null,
  applied_at timestamptz not null default now()
)`;

/** Any fixed key: it serialises only Rudder's ledger creation, nothing else takes it. */
const LEDGER_LOCK_KEY = 7_357_001;

/**
 * Concurrent `create table if not exists` can still collide in PostgreSQL's catalog, so ledger
 * creation is serialised by a transaction-scoped advisory lock.
 */
async function ensureLedger(db: Db): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("select pg_advisory_xact_lock($1)", [LEDGER_LOCK_KEY]);
    await tx.query(CREATE_LEDGER);
  });
}

export async function migrationStatus(db: Db, chain = loadMigrations()): Promise<MigrationStatus> {
  await ensureLedger(db);
  const applied = await db.query<{ id: number; name: string; applied_at: Date | string }>(
    "select id, name, applied_at from rudder_migrations order by id",
  );
  const appliedIds = new Set(applied.map((row) => row.id));
  const current = applied.length ? Math.max(...appliedIds) : 0;
  return {
    current,
    latest: chain.at(-1)?.id ?? 0,
    applied: applied.map((row) => ({ ...row, applied_at: new Date(row.applied_at).toISOString() })),
    pending: chain.filter((migration) => !appliedIds.has(migration.id)),
  };
}

/**
 * Applies the forward-only chain up to `to` (default: the latest). Each migration runs in its own
 * transaction that first records its id, so a concurrent migrator hits the primary key, rolls
 * back, and steps aside. Asking for a revision below the current one fails: there is no downgrade;
 * without `to`, a database newer than the binary is left as it is.
 */
export async function migrate(db: Db, options: { to?: number; chain?: Migration[] } = {}): Promise<number[]> {
  const chain = options.chain ?? loadMigrations();
  const status = await migrationStatus(db, chain);
  const target = options.to ?? status.latest;
  // Only a revision asked for can be a downgrade: by default a binary older than the database
  // (binaries rolled back, the schema kept: spec section 9) applies what it knows and lacks, if anything.
  if (options.to !== undefined && target < status.current) {
    throw new MigrationError(
      `the database is at revision ${status.current}; migrating down to ${target} is not supported (migrations are forward-only)`,
    );
  }
  if (!chain.some((migration) => migration.id === target) && target !== 0) {
    throw new MigrationError(`unknown migration revision ${target}; this binary knows 1..${status.latest}`);
  }
  const appliedNow: number[] = [];
  for (const migration of status.pending.filter((m) => m.id <= target)) {
    const applied = await db
      .transaction(async (tx) => {
        await tx.query("insert into rudder_migrations (id, name) values ($1, $2)", [migration.id, migration.name]);
        await tx.exec(migration.sql);
        return true;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) return false; // another migrator applied it first
        throw error;
      });
    if (applied) appliedNow.push(migration.id);
  }
  return appliedNow;
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "23505";
}
