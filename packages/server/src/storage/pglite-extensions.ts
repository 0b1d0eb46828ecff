import { vector } from "@electric-sql/pglite-pgvector";

/**
 * The extensions every PGlite Rudder opens is given: pgvector, for the store's semantic search
 * (the migration creates the extension when offered). A module of its own, so that PGlite's
 * worker thread (pglite-thread.ts) loads this and not the whole `Db` module with it.
 */
export const PGLITE_EXTENSIONS = { vector };
