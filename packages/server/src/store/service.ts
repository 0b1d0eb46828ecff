import {
  STORE_LIST_NAMESPACES_DEFAULT_LIMIT,
  STORE_SEARCH_DEFAULT_LIMIT,
  type StoreOperation,
  type StoreResult,
  type StoreSearchHit,
  type StoreSearchOperation,
} from "@rudder/api";
import { ApiError } from "../domain/errors.ts";
import {
  checkEmbeddings,
  checkItemAddress,
  checkNamespace,
  checkValue,
  effectiveTtl,
  indexableText,
  parseFilter,
  textsAtPath,
  vectorNorm,
  type FilterCondition,
} from "../domain/store.ts";
import type { Db, Queryable } from "../storage/db.ts";
import {
  deleteItem,
  getItem,
  hasPgvector,
  listNamespaces,
  lockItemsForWrite,
  putItem,
  searchItems,
  type PutRow,
  type SearchRanking,
} from "../storage/store.ts";

/** What the store needs of an embedder: LangChain's `Embeddings` has these two methods. */
export interface Embedder {
  embedDocuments(texts: string[]): Promise<number[][]>;
  embedQuery(text: string): Promise<number[]>;
}

export interface StoreSettings {
  /** Semantic search: `store.index` in rudder.json (absent: search by query is full-text). */
  readonly index?: { readonly embedder: Embedder; readonly dims: number; readonly fields: readonly string[] } | undefined;
  /** Minutes an item lives when its put names no `ttl` (null: for ever). */
  readonly defaultTtl: number | null;
  /** Whether get and search restart the TTL of what they return, when the operation does not say. */
  readonly refreshOnRead: boolean;
}

/** The fields indexed when neither the put nor `store.index` names any: the whole value. */
const WHOLE_VALUE = ["$"] as const;

/** An operation checked and made ready to run: embeddings computed, filter parsed. */
type Prepared =
  | { readonly kind: "put"; readonly row: PutRow }
  | { readonly kind: "get"; readonly namespace: string[]; readonly key: string; readonly refresh: boolean }
  | { readonly kind: "delete"; readonly namespace: string[]; readonly key: string }
  | {
      readonly kind: "search";
      readonly prefix: string[];
      readonly conditions: FilterCondition[];
      readonly query: string | undefined;
      readonly limit: number;
      readonly offset: number;
      readonly refresh: boolean;
    }
  | {
      readonly kind: "list_namespaces";
      readonly prefix: string[];
      readonly suffix: string[];
      readonly maxDepth: number | undefined;
      readonly limit: number;
      readonly offset: number;
    };

/**
 * The tenant's long-term store (DESIGN.md "Store"), for the HTTP API and for graph code alike.
 * A batch is checked whole before anything runs (a bad operation is a 422 naming its index and
 * field, and nothing is written), embeddings are computed before the transaction opens (an
 * embedder is a remote call; no transaction waits on it), then the operations run in order in
 * one transaction, one statement each.
 */
export class StoreService {
  private pgvector: Promise<boolean> | undefined;

  constructor(
    private readonly db: Db,
    readonly settings: StoreSettings,
  ) {}

  /**
   * Runs the operations in order, in one transaction (a lone operation is one statement, atomic on
   * its own). `where` names the operations list in a 422 (`body/operations`).
   */
  async batch(tenantId: string, operations: readonly StoreOperation[], where = "body/operations"): Promise<StoreResult[]> {
    return this.execute(
      tenantId,
      operations.map((operation, index) => this.prepare(operation, `${where}/${index}`)),
    );
  }

  /** One operation, a batch of one; `where` names it in a 422 (graph code: `store.put`). */
  async one(tenantId: string, operation: StoreOperation, where: string): Promise<StoreResult> {
    const [result] = await this.execute(tenantId, [this.prepare(operation, where)]);
    return result!;
  }

  private async execute(tenantId: string, prepared: Prepared[]): Promise<StoreResult[]> {
    const queries = await this.embedPutsAndQueries(prepared);
    // Which semantic path: asked (once) before the transaction opens. Asked inside it, on PGlite's
    // one connection, the question waited for the transaction, which waited for the answer.
    if (queries.size > 0) await this.semanticPath();
    if (prepared.length === 1) return this.runAll(this.db, tenantId, prepared, queries);
    const writes = prepared.flatMap((op): { namespace: readonly string[]; key: string }[] =>
      op.kind === "put" ? [op.row] : op.kind === "delete" ? [op] : [],
    );
    return this.db.transaction(async (tx) => {
      // Its items locked in one global order first, so concurrent batches never deadlock.
      if (writes.length > 0) await lockItemsForWrite(tx, tenantId, writes);
      return this.runAll(tx, tenantId, prepared, queries);
    });
  }

  /** `GET /v1/store/search`: one search operation. */
  async search(tenantId: string, operation: Omit<StoreSearchOperation, "kind">, where = "querystring"): Promise<StoreSearchHit[]> {
    const [hits] = await this.batch(tenantId, [{ kind: "search", ...operation }], where);
    return hits as StoreSearchHit[];
  }

  private prepare(operation: StoreOperation, where: string): Prepared {
    switch (operation.kind) {
      case "put":
        checkItemAddress(operation, where);
        checkValue(operation.value, `${where}/value`);
        return {
          kind: "put",
          row: {
            namespace: operation.namespace,
            key: operation.key,
            value: operation.value,
            searchText: this.indexedText(operation.value, operation.index),
            embedding: null,
            embeddingNorm: null,
            ttlMinutes: effectiveTtl(operation.ttl, this.settings.defaultTtl),
          },
        };
      case "get":
        checkItemAddress(operation, where);
        return {
          kind: "get",
          namespace: operation.namespace,
          key: operation.key,
          refresh: operation.refresh_ttl ?? this.settings.refreshOnRead,
        };
      case "delete":
        checkItemAddress(operation, where);
        return { kind: "delete", namespace: operation.namespace, key: operation.key };
      case "search":
        checkNamespace(operation.namespace, `${where}/namespace`, 0);
        return {
          kind: "search",
          prefix: operation.namespace,
          conditions: parseFilter(operation.filter, `${where}/filter`),
          query: operation.query,
          limit: operation.limit ?? STORE_SEARCH_DEFAULT_LIMIT,
          offset: operation.offset ?? 0,
          refresh: operation.refresh_ttl ?? this.settings.refreshOnRead,
        };
      case "list_namespaces":
        checkNamespace(operation.prefix ?? [], `${where}/prefix`, 0);
        checkNamespace(operation.suffix ?? [], `${where}/suffix`, 0);
        return {
          kind: "list_namespaces",
          prefix: operation.prefix ?? [],
          suffix: operation.suffix ?? [],
          maxDepth: operation.max_depth,
          limit: operation.limit ?? STORE_LIST_NAMESPACES_DEFAULT_LIMIT,
          offset: operation.offset ?? 0,
        };
    }
  }

  /** The text of the fields an item is indexed by (LangGraph's field paths), or null for `index: false`. */
  private indexedText(value: Record<string, unknown>, index: false | string[] | undefined): string | null {
    if (index === false) return null;
    const fields = index ?? this.settings.index?.fields ?? WHOLE_VALUE;
    const texts = fields.flatMap((field) => textsAtPath(value, field));
    return texts.length === 0 ? null : indexableText(texts.join("\n"));
  }

  /**
   * With an embedder: one `embedDocuments` call for every indexed put of the batch (each put's
   * `embedding` is filled in place of null) and one `embedQuery` per distinct search query.
   */
  private async embedPutsAndQueries(prepared: Prepared[]): Promise<Map<string, { embedding: number[]; norm: number }>> {
    const queries = new Map<string, { embedding: number[]; norm: number }>();
    const index = this.settings.index;
    if (!index) return queries;
    const puts = prepared.flatMap((op, position) =>
      op.kind === "put" && op.row.searchText !== null ? [{ position, text: op.row.searchText }] : [],
    );
    const texts = [...new Set(prepared.flatMap((op) => (op.kind === "search" && op.query !== undefined ? [op.query] : [])))];
    const [documents, queryVectors] = await Promise.all([
      puts.length === 0 ? [] : callEmbedder(() => index.embedder.embedDocuments(puts.map((put) => put.text))),
      Promise.all(texts.map((text) => callEmbedder(() => index.embedder.embedQuery(text)))),
    ]);
    checkEmbeddings(documents, puts.length, index.dims).forEach((embedding, i) => {
      const { position } = puts[i]!;
      const op = prepared[position] as Extract<Prepared, { kind: "put" }>;
      prepared[position] = { kind: "put", row: { ...op.row, embedding, embeddingNorm: vectorNorm(embedding) } };
    });
    checkEmbeddings(queryVectors, texts.length, index.dims).forEach((embedding, i) => {
      queries.set(texts[i]!, { embedding, norm: vectorNorm(embedding) });
    });
    return queries;
  }

  private async runAll(
    q: Queryable,
    tenantId: string,
    prepared: readonly Prepared[],
    queries: Map<string, { embedding: number[]; norm: number }>,
  ): Promise<StoreResult[]> {
    const results: StoreResult[] = [];
    for (const op of prepared) results.push(await this.runOne(q, tenantId, op, queries));
    return results;
  }

  private async runOne(
    q: Queryable,
    tenantId: string,
    op: Prepared,
    queries: Map<string, { embedding: number[]; norm: number }>,
  ): Promise<StoreResult> {
    switch (op.kind) {
      case "put":
        await putItem(q, tenantId, op.row);
        return null;
      case "get":
        return (await getItem(q, tenantId, op.namespace, op.key, op.refresh)) ?? null;
      case "delete":
        await deleteItem(q, tenantId, op.namespace, op.key);
        return null;
      case "search":
        return searchItems(q, tenantId, { ...op, ranking: await this.ranking(op.query, queries) });
      case "list_namespaces":
        return listNamespaces(q, tenantId, op);
    }
  }

  private async ranking(query: string | undefined, queries: Map<string, { embedding: number[]; norm: number }>): Promise<SearchRanking> {
    if (query === undefined) return { kind: "none" };
    const vector = queries.get(query);
    if (!vector) return { kind: "text", text: query };
    this.pgvector ??= hasPgvector(this.db);
    return { kind: "vector", text: query, ...vector, pgvector: await this.pgvector };
  }

  /** Which path semantic search takes on this database (for docs, benchmarks and tests). */
  async semanticPath(): Promise<"pgvector" | "exact-scan"> {
    this.pgvector ??= hasPgvector(this.db);
    return (await this.pgvector) ? "pgvector" : "exact-scan";
  }
}

/** An embedder that fails (a remote model unreachable) makes the operation retryable, not a 500. */
async function callEmbedder<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const unavailable = new ApiError("unavailable", `the store's embedder failed: ${(error as Error).message}`, { retryAfterSeconds: 1 });
    unavailable.cause = error;
    throw unavailable;
  }
}
