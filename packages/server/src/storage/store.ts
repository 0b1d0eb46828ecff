import type { StoreItem, StoreSearchHit } from "@rudder/api";
import { namespacePath, type FilterCondition } from "../domain/store.ts";
import type { Queryable } from "./db.ts";
import { iso, json } from "./rows.ts";

/**
 * The store's SQL (table `store_items`, migration 000009). Every statement names the tenant, and
 * every read skips expired rows (`expires_at <= now()`) whether or not the sweeper removed them yet.
 * Each function is one statement: a TTL refresh on read rides in the read as a data-modifying CTE.
 */

interface ItemRow {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  created_at: Date | string;
  updated_at: Date | string;
}

interface HitRow extends ItemRow {
  score: number | string | null;
}

/** The text search configuration of `search_text` and of queries. */
const TEXT_CONFIG = "english";
const ALIVE = "(expires_at is null or expires_at > now())";
const ITEM_COLUMNS = "namespace, key, value, created_at, updated_at";

const toItem = (row: ItemRow): StoreItem => ({
  namespace: row.namespace,
  key: row.key,
  value: row.value,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/** Builds a statement's parameter list, handing back each value's placeholder. */
class Params {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

export interface PutRow {
  readonly namespace: readonly string[];
  readonly key: string;
  readonly value: Record<string, unknown>;
  /** The indexed fields' text, or null when the item is not indexed. */
  readonly searchText: string | null;
  readonly embedding: readonly number[] | null;
  readonly embeddingNorm: number | null;
  readonly ttlMinutes: number | null;
}

/**
 * Inserts or replaces an item. Replacing keeps `created_at`, unless the old row had expired (then
 * the item is new). The insert's defaults give the statement's one `now()`.
 */
export async function putItem(db: Queryable, tenantId: string, row: PutRow): Promise<void> {
  await db.query(
    `insert into store_items (tenant_id, ns_path, key, namespace, value, search_text, embedding, embedding_norm, ttl_minutes, expires_at)
     values ($1, $2, $3, $4::text[], $5::jsonb, to_tsvector('${TEXT_CONFIG}', $6::text), $7::real[], $8::float8, $9::float8,
             now() + $9::float8 * interval '1 minute')
     on conflict (tenant_id, ns_path, key) do update set
       value = excluded.value, search_text = excluded.search_text, embedding = excluded.embedding,
       embedding_norm = excluded.embedding_norm, ttl_minutes = excluded.ttl_minutes, expires_at = excluded.expires_at,
       updated_at = excluded.updated_at,
       created_at = case when store_items.expires_at <= excluded.created_at then excluded.created_at else store_items.created_at end`,
    [
      tenantId,
      namespacePath(row.namespace),
      row.key,
      row.namespace,
      json(row.value),
      row.searchText,
      row.embedding,
      row.embeddingNorm,
      row.ttlMinutes,
    ],
  );
}

/** Deletes an item; a missing one is no error. */
export async function deleteItem(db: Queryable, tenantId: string, namespace: readonly string[], key: string): Promise<void> {
  await db.query("delete from store_items where tenant_id = $1 and ns_path = $2 and key = $3", [tenantId, namespacePath(namespace), key]);
}

/**
 * The refresh of the hits' expiry, as a CTE over `hits` (columns ns_path, key). A read never waits
 * for a row lock: a hit another transaction is writing at this moment (a put, which sets its own
 * expiry, a delete, or another refresh) is skipped (`skip locked`). A read that waited while
 * holding the rows it had refreshed could close a cycle with a batch writing them (see
 * `lockItemsForWrite`).
 */
const REFRESH = (tenant: string) =>
  `, refreshable as (
     select s.ns_path, s.key from store_items s join hits h on s.ns_path = h.ns_path and s.key = h.key
      where s.tenant_id = ${tenant} and s.ttl_minutes is not null
      order by s.ns_path, s.key
        for update of s skip locked),
   refreshed as (
     update store_items s set expires_at = now() + s.ttl_minutes * interval '1 minute'
       from refreshable r
      where s.tenant_id = ${tenant} and s.ns_path = r.ns_path and s.key = r.key
     returning 1)`;

/** The first key of the store's advisory locks (their two-key form, which no other lock of Rudder's uses). */
const STORE_LOCK_CLASS = 0x53544f52; // "STOR"

/** A 32-bit FNV-1a hash of the item's address within the tenant: the second key of its advisory lock. */
function itemLockKey(tenantId: string, nsPath: string, key: string): number {
  let hash = 0x811c9dc5;
  for (const char of `${tenantId}\u0000${nsPath}\u0000${key}`) {
    hash ^= char.codePointAt(0)!;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

/**
 * The lock phase of a batch that writes (in its transaction, before its first operation): every
 * item it puts or deletes is locked in one global order, so two batches writing the same items in
 * different orders wait for each other instead of deadlocking (PostgreSQL then kills one: a 503).
 * First a transaction-scoped advisory lock per address, in the order of the lock keys (this covers
 * items that do not exist yet, whose insertion takes no row lock until it happens); then the rows
 * that exist, `for update`, in (ns_path, key) order. After this phase the batch waits for no lock
 * another batch could hold while waiting for it: its own writes are locked, reads never wait (MVCC),
 * and a TTL refresh skips rows others hold. A lone statement holds one row at most, so it closes no
 * cycle either. The operations then run in the batch's order, with its answers in that order.
 */
export async function lockItemsForWrite(
  db: Queryable,
  tenantId: string,
  items: readonly { readonly namespace: readonly string[]; readonly key: string }[],
): Promise<void> {
  const addresses = new Map<string, { path: string; key: string; lock: number }>();
  for (const item of items) {
    const path = namespacePath(item.namespace);
    addresses.set(`${path}\u0000${item.key}`, { path, key: item.key, lock: itemLockKey(tenantId, path, item.key) });
  }
  const locks = [...new Set([...addresses.values()].map((address) => address.lock))].sort((a, b) => a - b);
  // unnest yields the array's order, and each row's call runs as its row is read: locks taken in order.
  await db.query("select pg_advisory_xact_lock($1::int, lock) from unnest($2::int[]) as lock", [STORE_LOCK_CLASS, locks]);
  const rows = [...addresses.values()];
  await db.query(
    `select 1 from store_items
      where tenant_id = $1 and (ns_path, key) in (select * from unnest($2::text[], $3::text[]))
      order by ns_path, key
        for update`,
    [tenantId, rows.map((row) => row.path), rows.map((row) => row.key)],
  );
}

/** An unexpired item, or undefined; with `refresh`, its TTL restarts (same statement). */
export async function getItem(
  db: Queryable,
  tenantId: string,
  namespace: readonly string[],
  key: string,
  refresh: boolean,
): Promise<StoreItem | undefined> {
  const [row] = await db.query<ItemRow>(
    `with hits as (
       select ns_path, ${ITEM_COLUMNS} from store_items where tenant_id = $1 and ns_path = $2 and key = $3 and ${ALIVE})
     ${refresh ? REFRESH("$1") : ""}
     select ${ITEM_COLUMNS} from hits`,
    [tenantId, namespacePath(namespace), key],
  );
  return row && toItem(row);
}

/** How a query ranks: by text, or by an embedding (with pgvector's operator, or an exact scan in SQL). */
export type SearchRanking =
  | { readonly kind: "none" }
  | { readonly kind: "text"; readonly text: string }
  | {
      readonly kind: "vector";
      readonly text: string;
      readonly embedding: readonly number[];
      readonly norm: number;
      readonly pgvector: boolean;
    };

export interface SearchRequest {
  readonly prefix: readonly string[];
  readonly conditions: readonly FilterCondition[];
  readonly ranking: SearchRanking;
  readonly limit: number;
  readonly offset: number;
  readonly refresh: boolean;
}

/** `ns_path` is the prefix or lies below it: a range of the primary key (C collation). */
function prefixCondition(params: Params, prefix: readonly string[]): string {
  if (prefix.length === 0) return "true";
  const path = params.add(namespacePath(prefix));
  return `(ns_path = ${path} or (ns_path >= ${path} || '/' and ns_path < ${path} || '0'))`;
}

/** One filter condition on a top-level field of `value`. */
function filterCondition(params: Params, condition: FilterCondition): string {
  const field = `value -> ${params.add(condition.field)}`;
  switch (condition.op) {
    case "$eq":
      return `${field} = ${params.add(json(condition.value))}::jsonb`;
    case "$ne":
      return `${field} is distinct from ${params.add(json(condition.value))}::jsonb`;
    default: {
      const sqlOp = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" }[condition.op];
      // CASE fixes the order: the cast runs only on a field of the right JSON type.
      return typeof condition.value === "number"
        ? `case when jsonb_typeof(${field}) = 'number' then (${field})::numeric ${sqlOp} ${params.add(condition.value)}::numeric else false end`
        : `case when jsonb_typeof(${field}) = 'string' then (${field} #>> '{}') collate "C" ${sqlOp} ${params.add(condition.value)}::text else false end`;
    }
  }
}

/**
 * Searches a namespace prefix, newest first without a query; with a query, the matching items by
 * text rank, or by cosine similarity of embeddings (items without an embedding follow, ranked by
 * text, if their text matches). One statement, TTL refresh included.
 */
export async function searchItems(db: Queryable, tenantId: string, request: SearchRequest): Promise<StoreSearchHit[]> {
  const params = new Params();
  const tenant = params.add(tenantId);
  const where = [
    `tenant_id = ${tenant}`,
    ALIVE,
    prefixCondition(params, request.prefix),
    ...request.conditions.map((c) => filterCondition(params, c)),
  ];
  let tier = "0";
  let score = "null::float8";
  const { ranking } = request;
  if (ranking.kind !== "none") {
    const tsquery = `replace(plainto_tsquery('${TEXT_CONFIG}', ${params.add(ranking.text)})::text, ' & ', ' | ')::tsquery`;
    const textMatch = `search_text @@ ${tsquery}`;
    const textRank = `ts_rank(search_text, ${tsquery})::float8`;
    if (ranking.kind === "text") {
      where.push(textMatch);
      score = textRank;
    } else {
      const cosine = ranking.pgvector
        ? `1 - (embedding::vector <=> ${params.add(`[${ranking.embedding.join(",")}]`)}::vector)`
        : `(select sum(a::float8 * b) from unnest(embedding, ${params.add(ranking.embedding)}::real[]) as pair(a, b)) / nullif(embedding_norm * ${params.add(ranking.norm)}::float8, 0)`;
      where.push(`(embedding is not null or ${textMatch})`);
      tier = "case when embedding is null then 1 else 0 end";
      // A zero vector has no direction: its similarity to anything is 0 on both paths. pgvector's
      // `<=>` answers NaN there (which sorts above every number and is not JSON), the exact scan
      // null (its division by a zero norm); both become 0.
      score = `case when embedding is null then ${textRank} else coalesce(nullif((${cosine})::float8, 'NaN'::float8), 0) end`;
    }
  }
  const order = "tier, score desc nulls last, updated_at desc, ns_path, key";
  const rows = await db.query<HitRow>(
    `with hits as (
       select ns_path, ${ITEM_COLUMNS}, ${tier} as tier, ${score} as score
         from store_items
        where ${where.join(" and ")}
        order by ${order}
        limit ${params.add(request.limit)} offset ${params.add(request.offset)})
     ${request.refresh ? REFRESH(tenant) : ""}
     select ${ITEM_COLUMNS}, score from hits order by ${order}`,
    params.values,
  );
  return rows.map((row) => ({ ...toItem(row), score: row.score === null ? null : Number(row.score) }));
}

export interface ListNamespacesRequest {
  /** Segments the namespace starts with; "*" matches any one segment. */
  readonly prefix: readonly string[];
  /** Segments the namespace ends with; "*" matches any one segment. */
  readonly suffix: readonly string[];
  readonly maxDepth: number | undefined;
  readonly limit: number;
  readonly offset: number;
}

/** The distinct namespaces holding unexpired items, truncated to `maxDepth`, in order. */
export async function listNamespaces(db: Queryable, tenantId: string, request: ListNamespacesRequest): Promise<string[][]> {
  const params = new Params();
  const where = [`tenant_id = ${params.add(tenantId)}`, ALIVE];
  if (request.prefix.length > 0 || request.suffix.length > 0) {
    where.push(`cardinality(namespace) >= ${params.add(Math.max(request.prefix.length, request.suffix.length))}`);
  }
  request.prefix.forEach((segment, index) => {
    if (segment !== "*") where.push(`namespace[${index + 1}] = ${params.add(segment)}`);
  });
  request.suffix.forEach((segment, index) => {
    if (segment !== "*") where.push(`namespace[cardinality(namespace) - ${request.suffix.length - index - 1}] = ${params.add(segment)}`);
  });
  const ns = request.maxDepth === undefined ? "namespace" : `namespace[1:${params.add(request.maxDepth)}::int]`;
  const rows = await db.query<{ ns: string[] }>(
    `select ns from (select distinct ${ns} as ns from store_items where ${where.join(" and ")}) d
      order by ns collate "C" limit ${params.add(request.limit)} offset ${params.add(request.offset)}`,
    params.values,
  );
  return rows.map((row) => row.ns);
}

/**
 * Deletes up to `limit` expired items (any tenant); rows another sweeper holds are skipped, so
 * many processes may sweep at once. Returns how many it deleted.
 */
export async function sweepExpiredItems(db: Queryable, limit: number): Promise<number> {
  const rows = await db.query(
    `delete from store_items s
      using (select tenant_id, ns_path, key from store_items
              where expires_at <= now() order by expires_at limit $1 for update skip locked) e
      where s.tenant_id = e.tenant_id and s.ns_path = e.ns_path and s.key = e.key
     returning 1`,
    [limit],
  );
  return rows.length;
}

/** Whether the database has pgvector installed (the migration creates it where it is offered). */
export async function hasPgvector(db: Queryable): Promise<boolean> {
  const rows = await db.query("select 1 from pg_extension where extname = 'vector'");
  return rows.length > 0;
}
