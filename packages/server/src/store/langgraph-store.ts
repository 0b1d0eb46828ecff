import { BaseStore, type Item, type Operation, type OperationResults, type SearchItem } from "@langchain/langgraph-checkpoint";
import type { StoreItem, StoreOperation, StoreResult, StoreSearchHit } from "@rudder/api";
import type { StoreService } from "./service.ts";

/**
 * A store that runs one operation as a batch of one under the name of the call that made it (a
 * 422 names `store.put/key`, not `store.batch/0/key`); the run's `AsyncBatchedStore` uses it when
 * the store it wraps has it (worker/batched-store.ts).
 */
export interface SingleOperationStore {
  one(operation: Operation): Promise<unknown>;
}

/**
 * LangGraph's `BaseStore` over one tenant's store: what a run's nodes get as `config.store`,
 * `getStore()` and the Runtime's `store`. Every batch goes through `StoreService`, the same path
 * and the same rules as `POST /v1/store/batch`, scoped to the run's tenant: graph code cannot
 * name another tenant.
 */
export class TenantStore extends BaseStore implements SingleOperationStore {
  // JS private, not TS `private`: graph code holds this object, and a TS-private field is a plain
  // property at run time, so it could set the tenant, or build a twin for any tenant from the
  // service (docs/store.md, "Graph code").
  readonly #service: StoreService;
  readonly #tenantId: string;

  constructor(service: StoreService, tenantId: string) {
    super();
    this.#service = service;
    this.#tenantId = tenantId;
  }

  /** `store.batch([...])`: one transaction; a 422 names `store.batch/<index>/<field>`. */
  override async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results = await this.#service.batch(this.#tenantId, operations.map(toWire), "store.batch");
    return results.map(fromWire) as OperationResults<Op>;
  }

  /**
   * One `put`, `get`, `search`, `delete` or `listNamespaces` of a node, a batch of one (the
   * run's `AsyncBatchedStore` hands each call here, worker/batched-store.ts); a 422 names the
   * call, e.g. `store.put/key`.
   */
  async one(operation: Operation): Promise<unknown> {
    const wire = toWire(operation);
    return fromWire(await this.#service.one(this.#tenantId, wire, CALL_NAMES[wire.kind]));
  }
}

/** The `BaseStore` method that makes each kind of operation. */
const CALL_NAMES: Record<StoreOperation["kind"], string> = {
  put: "store.put",
  get: "store.get",
  delete: "store.delete",
  search: "store.search",
  list_namespaces: "store.listNamespaces",
};

/** LangGraph's operation shapes (told apart by their fields, as LangGraph does) as the wire's. */
function toWire(operation: Operation): StoreOperation {
  if ("namespacePrefix" in operation) {
    return {
      kind: "search",
      namespace: operation.namespacePrefix,
      ...(operation.query !== undefined && operation.query !== "" ? { query: operation.query } : {}),
      ...(operation.filter !== undefined ? { filter: operation.filter } : {}),
      ...(operation.limit !== undefined ? { limit: operation.limit } : {}),
      ...(operation.offset !== undefined ? { offset: operation.offset } : {}),
    };
  }
  if ("value" in operation) {
    if (operation.value === null) return { kind: "delete", namespace: operation.namespace, key: operation.key };
    return {
      kind: "put",
      namespace: operation.namespace,
      key: operation.key,
      value: operation.value,
      ...(operation.index !== undefined ? { index: operation.index } : {}),
    };
  }
  if ("namespace" in operation) return { kind: "get", namespace: operation.namespace, key: operation.key };
  const prefix = operation.matchConditions?.find((condition) => condition.matchType === "prefix")?.path;
  const suffix = operation.matchConditions?.find((condition) => condition.matchType === "suffix")?.path;
  return {
    kind: "list_namespaces",
    ...(prefix ? { prefix } : {}),
    ...(suffix ? { suffix } : {}),
    ...(operation.maxDepth !== undefined ? { max_depth: operation.maxDepth } : {}),
    limit: operation.limit,
    offset: operation.offset,
  };
}

function fromWire(result: StoreResult): Item | SearchItem[] | string[][] | null {
  if (result === null) return null;
  if (!Array.isArray(result)) return toItem(result);
  return (result as (StoreSearchHit | string[])[]).map((entry) =>
    Array.isArray(entry) ? entry : { ...toItem(entry), ...(entry.score === null ? {} : { score: entry.score }) },
  ) as SearchItem[] | string[][];
}

function toItem(item: StoreItem): Item {
  return {
    namespace: item.namespace,
    key: item.key,
    value: item.value,
    createdAt: new Date(item.created_at),
    updatedAt: new Date(item.updated_at),
  };
}
