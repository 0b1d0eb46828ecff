import { Type, type Static } from "typebox";
import { JsonObject, MAX_INT32, Timestamp } from "./common.ts";

/**
 * The long-term store (DESIGN.md "Store"): items addressed by a namespace (a path of segments)
 * and a key, per tenant. `POST /v1/store/batch` runs a list of operations in one transaction;
 * `GET /v1/store/search` is the search operation as a query string.
 */

/** The most operations one batch may hold. */
export const STORE_MAX_OPERATIONS = 1000;
/** A search's `limit` when none is given (batch and GET alike). */
export const STORE_SEARCH_DEFAULT_LIMIT = 10;
/** A list_namespaces' `limit` when none is given. */
export const STORE_LIST_NAMESPACES_DEFAULT_LIMIT = 100;
/** UTF-8 bytes of a namespace's segments joined by "/" plus its key: the database indexes them together. */
export const STORE_MAX_ADDRESS_BYTES = 2048;

/** Characters (code points) a namespace segment may hold. */
export const STORE_MAX_SEGMENT_LENGTH = 256;
/** Segments a namespace may have. */
export const STORE_MAX_SEGMENTS = 32;
/** Characters (code points) a key may hold. */
export const STORE_MAX_KEY_LENGTH = 1024;

/**
 * One segment of a namespace: non-empty, no "/" (segments are stored joined by it, and the GET
 * route joins them with it). The store service holds graph code to the same rules
 * (server domain/store.ts: `checkNamespace`, `checkKey`).
 */
export const NamespaceSegment = Type.String({ minLength: 1, maxLength: STORE_MAX_SEGMENT_LENGTH, pattern: "^[^/]+$" });
/** A namespace of one or more segments (put, get, delete). */
export const Namespace = Type.Array(NamespaceSegment, { minItems: 1, maxItems: STORE_MAX_SEGMENTS });
export type Namespace = Static<typeof Namespace>;
/** A namespace prefix: `[]` is the whole store. */
export const NamespacePrefix = Type.Array(NamespaceSegment, { maxItems: STORE_MAX_SEGMENTS });
/** A pattern of list_namespaces: segments, each may be "*" (any one segment). */
export const NamespacePattern = Type.Array(NamespaceSegment, { maxItems: STORE_MAX_SEGMENTS });

export const StoreKey = Type.String({ minLength: 1, maxLength: STORE_MAX_KEY_LENGTH });
/** Minutes an item lives after its put (or its last refreshing read); fractional allowed; null: for ever. */
export const StoreTtl = Type.Union([Type.Number({ exclusiveMinimum: 0, maximum: 5_256_000 }), Type.Null()]);

const Limit = (fallback: number) => Type.Integer({ minimum: 1, maximum: 1000, description: `default ${fallback}` });
const Offset = Type.Integer({ minimum: 0, maximum: MAX_INT32 });

/**
 * A search filter: value fields (top level) matched by equality with a JSON value, or by an
 * object of operators `$eq $ne $gt $gte $lt $lte` (the order operators take a number or a string).
 */
export const StoreFilter = Type.Record(Type.String({ minLength: 1 }), Type.Unknown(), {
  description: 'e.g. {"status": "active", "score": {"$gte": 3}}',
});
export type StoreFilter = Static<typeof StoreFilter>;

const strict = { additionalProperties: false } as const;

export const StorePutOperation = Type.Object(
  {
    kind: Type.Literal("put"),
    namespace: Namespace,
    key: StoreKey,
    value: JsonObject,
    index: Type.Optional(
      Type.Union([Type.Literal(false), Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 32 })], {
        description: "false: not indexed for search by query; a list of field paths: index those instead of the configured fields",
      }),
    ),
    ttl: Type.Optional(StoreTtl),
  },
  { ...strict, title: "put" },
);
export type StorePutOperation = Static<typeof StorePutOperation>;

export const StoreGetOperation = Type.Object(
  { kind: Type.Literal("get"), namespace: Namespace, key: StoreKey, refresh_ttl: Type.Optional(Type.Boolean()) },
  { ...strict, title: "get" },
);
export type StoreGetOperation = Static<typeof StoreGetOperation>;

export const StoreDeleteOperation = Type.Object(
  { kind: Type.Literal("delete"), namespace: Namespace, key: StoreKey },
  { ...strict, title: "delete" },
);
export type StoreDeleteOperation = Static<typeof StoreDeleteOperation>;

export const StoreSearchOperation = Type.Object(
  {
    kind: Type.Literal("search"),
    namespace: NamespacePrefix,
    query: Type.Optional(Type.String({ minLength: 1, maxLength: 8192 })),
    filter: Type.Optional(StoreFilter),
    limit: Type.Optional(Limit(STORE_SEARCH_DEFAULT_LIMIT)),
    offset: Type.Optional(Offset),
    refresh_ttl: Type.Optional(Type.Boolean()),
  },
  { ...strict, title: "search" },
);
export type StoreSearchOperation = Static<typeof StoreSearchOperation>;

export const StoreListNamespacesOperation = Type.Object(
  {
    kind: Type.Literal("list_namespaces"),
    prefix: Type.Optional(NamespacePattern),
    suffix: Type.Optional(NamespacePattern),
    max_depth: Type.Optional(Type.Integer({ minimum: 1, maximum: 32 })),
    limit: Type.Optional(Limit(STORE_LIST_NAMESPACES_DEFAULT_LIMIT)),
    offset: Type.Optional(Offset),
  },
  { ...strict, title: "list_namespaces" },
);
export type StoreListNamespacesOperation = Static<typeof StoreListNamespacesOperation>;

const OperationUnion = Type.Union([
  StorePutOperation,
  StoreGetOperation,
  StoreDeleteOperation,
  StoreSearchOperation,
  StoreListNamespacesOperation,
]);
export type StoreOperation = Static<typeof OperationUnion>;
export type StoreOperationKind = StoreOperation["kind"];

/**
 * One operation, picked by `kind`: a `oneOf` with a discriminator, so a validator checks only the
 * shape `kind` names and reports that shape's fault (its field), not one fault per kind.
 */
export const StoreOperation = Type.Unsafe<StoreOperation>({
  type: "object",
  required: ["kind"],
  discriminator: { propertyName: "kind" },
  oneOf: OperationUnion.anyOf,
});

export const StoreBatchBody = Type.Object(
  { operations: Type.Array(StoreOperation, { minItems: 1, maxItems: STORE_MAX_OPERATIONS }) },
  { additionalProperties: false },
);
export type StoreBatchBody = Static<typeof StoreBatchBody>;

export const StoreItem = Type.Object(
  {
    namespace: Type.Array(Type.String()),
    key: Type.String(),
    value: JsonObject,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "StoreItem" },
);
export type StoreItem = Static<typeof StoreItem>;

export const StoreSearchHit = Type.Object(
  {
    namespace: Type.Array(Type.String()),
    key: Type.String(),
    value: JsonObject,
    created_at: Timestamp,
    updated_at: Timestamp,
    score: Type.Union([Type.Number(), Type.Null()], { description: "higher is better; null when no query was given" }),
  },
  { title: "StoreSearchHit" },
);
export type StoreSearchHit = Static<typeof StoreSearchHit>;

/** The result of one operation: null (put, delete), an item or null (get), hits (search), namespaces (list_namespaces). */
export const StoreResult = Type.Union([Type.Null(), StoreItem, Type.Array(StoreSearchHit), Type.Array(Type.Array(Type.String()))]);
export type StoreResult = Static<typeof StoreResult>;

export const StoreBatchAnswer = Type.Object({ results: Type.Array(StoreResult) }, { title: "StoreBatchAnswer" });
export type StoreBatchAnswer = Static<typeof StoreBatchAnswer>;

export const StoreSearchQuery = Type.Object(
  {
    namespace: Type.Optional(
      Type.String({ maxLength: 8192, description: "namespace prefix, segments joined by /; empty or absent: the whole store" }),
    ),
    query: Type.Optional(Type.String({ minLength: 1, maxLength: 8192 })),
    filter: Type.Optional(Type.String({ description: "JSON object, as a search operation's filter" })),
    limit: Type.Optional(Limit(STORE_SEARCH_DEFAULT_LIMIT)),
    offset: Type.Optional(Offset),
    refresh_ttl: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type StoreSearchQuery = Static<typeof StoreSearchQuery>;
