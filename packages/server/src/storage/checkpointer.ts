import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  EXCLUDED_METADATA_KEYS,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";

import type { CheckpointTarget } from "../domain/steering.ts";
import { checkpointWrite, CheckpointWriteBatcher, taskWrites, writeAll, type CheckpointWrite } from "./checkpoint-writes.ts";
import type { Db, Queryable, Transaction } from "./db.ts";
import { serializedFault, UnstorableOutputError } from "../domain/storable-json.ts";

/**
 * Lets the run commit its own bookkeeping in the same transaction as a checkpoint write (steering
 * a task consumed is settled with the task's writes, so a crash between the two cannot leave the
 * rows settled without the writes).
 */
export interface CheckpointCommitHook {
  /** Whether this write must commit with the hook; cheap, in memory. When false the saver writes alone. */
  covers(commit: CheckpointTarget): boolean;
  /** Inside the transaction that stores the write. */
  onCommit(tx: Transaction, commit: CheckpointTarget): Promise<void>;
}

/**
 * Where a run (and every Rudder read of a thread's state) names its tenant in `config.configurable`:
 * checkpoints are keyed by (tenant, thread), and every statement of the saver names the tenant.
 */
export const TENANT_KEY = "__rudder_tenant_id";

/**
 * Where a run lends its graph the checkpointer to use: LangGraph's `CONFIG_KEY_CHECKPOINTER`
 * (not exported). A graph prefers the one lent here over the one it was compiled with (Pregel's
 * `_resolveCheckpointer`, as a parent lends a subgraph its own), and every task's config carries
 * it on, so graph code reaches the run's `RunCheckpointSaver`, never the shared saver.
 */
export const LENT_CHECKPOINTER_KEY = "__pregel_checkpointer";

/**
 * What one run attempt's checkpoint traffic may skip. With `defer` (durability "exit", where
 * LangGraph writes only when the graph exits) writes wait here and commit in the transaction
 * that settles the attempt, so they land with the run's outcome or not at all; a read flushes
 * them first. In every durability the input checkpoint (LangGraph's step -1, written before any
 * node runs) waits here too, for the attempt's next write, which commits it in the same
 * statement, or for a read or the settle. With `holdsSteps` (durability "sync") every write
 * waits here until graph code needs it durable: the next task of graph code to start (the
 * attempt's `TaskStartBarrier` commits them first), a read, the steering gate or the settle. Sync
 * asks that a step's checkpoint be durable before the next step's nodes run; held so, it is, and
 * the last step's checkpoint rides the gate's commit instead of a commit of its own. Two
 * exceptions keep what sync promises: a task's writes that finish while another task of graph
 * code still runs go at once (a crash then does not repeat the finished task), and the first task
 * of graph code does not wait for what came before it (the input and LangGraph's `__start__`
 * step run no graph code: a retry that starts over from the input repeats nothing the graph did).
 * With `knownEmpty` (a stateless run's first attempt: its thread id is the new run's id) reads of
 * that thread find nothing without asking the database, until something is written.
 */
export class AttemptCheckpoints {
  readonly deferred: CheckpointWrite[] = [];
  /** The last flush started: later flushes, and tasks waiting for one, queue behind it. */
  flushing: Promise<void> = Promise.resolve();
  /** Tasks of graph code running now, by checkpoint namespace (`TaskStartBarrier` keeps it). */
  readonly runningTasks = new Set<string>();
  /** Whether a task of graph code has started in this attempt. */
  graphCodeStarted = false;

  constructor(
    readonly threadId: string,
    readonly defer: boolean,
    public knownEmpty: boolean,
    readonly holdsSteps = false,
  ) {}

  /**
   * What the steering gate commits with its statement: with `holdsSteps`, everything still held
   * (the last step's checkpoint), once any flush in flight is done (one that failed already failed
   * the graph, whose outcome says so). With `defer` the settle takes the writes instead.
   */
  async heldForGate(): Promise<CheckpointWrite[]> {
    await this.flushing.catch(() => {});
    return this.holdsSteps ? this.deferred.splice(0) : [];
  }

  /** Whether `write` waits here rather than going to the database now. */
  holds(write: CheckpointTarget, input: boolean): boolean {
    if (this.defer || input) return true;
    return this.holdsSteps && !(write.kind === "writes" && this.runningTasks.size > 0);
  }
}

/**
 * Whom one call of the saver acts for: a tenant and, in a run's attempt, the run's commit hook and
 * the attempt's held writes. The shared saver takes the tenant from each call's config (Rudder's
 * own reads name it); a run's saver is bound to its run's, so nothing graph code puts in a config
 * can change them.
 */
export interface CheckpointScope {
  readonly tenantId: string;
  readonly attempt?: AttemptCheckpoints | undefined;
  readonly commitHook?: CheckpointCommitHook | undefined;
}

/** One stored write as the read queries aggregate it: task id, channel, serde type, base64 value. */
type StoredWrite = [taskId: string, channel: string, type: string, value: string];

interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint_type: string;
  checkpoint: Uint8Array;
  metadata: string;
  pending_writes: StoredWrite[] | string;
}

interface PendingSendRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  value_type: string;
  value: Uint8Array;
}

/** The order LangGraph applies a superstep's writes in (`writesSortKey`): code point order, hence "C". */
const WRITES_ORDER = `task_path collate "C", task_id collate "C", idx`;

/**
 * The checkpoint row and, in the same round trip, its pending writes. Write values travel as base64
 * inside json_agg, which pg and PGlite both hand back parsed, so no driver-specific bytea[] decoding.
 */
const SELECT_TUPLE = `select c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
  c.checkpoint_type, c.checkpoint, c.metadata::text as metadata,
  (select coalesce(json_agg(json_build_array(w.task_id, w.channel, w.value_type, encode(w.value, 'base64'))
                            order by ${WRITES_ORDER}), '[]'::json)
     from checkpoint_writes w
    where w.tenant_id = c.tenant_id and w.thread_id = c.thread_id and w.checkpoint_ns = c.checkpoint_ns
      and w.checkpoint_id = c.checkpoint_id
  ) as pending_writes
from checkpoints c`;

const SELECT_TUPLE_BY_ID = `${SELECT_TUPLE} where c.tenant_id = $1 and c.thread_id = $2 and c.checkpoint_ns = $3 and c.checkpoint_id = $4`;
/** Without an id, the latest: a backward scan of the primary key, as uuid6 ids sort by creation time. */
const SELECT_LATEST_TUPLE = `${SELECT_TUPLE} where c.tenant_id = $1 and c.thread_id = $2 and c.checkpoint_ns = $3
order by c.checkpoint_id desc limit 1`;

/** Legacy (v < 4) checkpoints kept their pending sends as TASKS writes on the parent checkpoint. */
const SELECT_PENDING_SENDS = `select w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.value_type, w.value
from checkpoint_writes w
join jsonb_to_recordset($1::jsonb) as p(thread_id text, checkpoint_ns text, checkpoint_id text)
  on w.thread_id = p.thread_id and w.checkpoint_ns = p.checkpoint_ns and w.checkpoint_id = p.checkpoint_id
where w.tenant_id = $3 and w.channel = $2
order by ${WRITES_ORDER}`;

/** One statement, so a thread is never left with writes whose checkpoint is gone. */
const DELETE_THREAD = `with deleted_writes as (delete from checkpoint_writes where tenant_id = $1 and thread_id = $2)
delete from checkpoints where tenant_id = $1 and thread_id = $2`;

/** What a saver is built with besides the database. */
export interface CheckpointSaverOptions {
  readonly serde?: SerializerProtocol | undefined;
  /**
   * The tenant of a call whose `config.configurable` names none (`TENANT_KEY`). Default `""`: a
   * saver used on its own, outside Rudder's runs, keeps its checkpoints under tenant "". `null`:
   * every call must name its tenant (Rudder's own saver), so a path that forgets fails loudly
   * instead of reading or writing another tenant's rows.
   */
  readonly tenantId?: string | null | undefined;
}

/**
 * LangGraph checkpoint saver over Rudder's `Db` seam, so the same code persists threads on PostgreSQL
 * and on PGlite. Each checkpoint is stored whole (one row per checkpoint, one write per `put`), its
 * metadata as jsonb so Rudder can filter and read it in SQL.
 */
export class RudderCheckpointSaver extends BaseCheckpointSaver {
  private readonly batcher: CheckpointWriteBatcher;
  private readonly tenantId: string | null;

  constructor(
    private readonly db: Db,
    options: SerializerProtocol | CheckpointSaverOptions = {},
  ) {
    const { serde, tenantId = "" } = isSerde(options) ? { serde: options } : options;
    super(serde);
    this.tenantId = tenantId;
    this.batcher = new CheckpointWriteBatcher(db);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    return this.getTupleIn(this.scopeOf(config), config);
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    yield* this.listIn(this.scopeOf(config), config, options);
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    _newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    return this.putIn(this.scopeOf(config), config, checkpoint, metadata);
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    return this.putWritesIn(this.scopeOf(config), config, writes, taskId, taskPath);
  }

  /** BaseCheckpointSaver's signature names no config: the thread of the saver's own tenant. */
  async deleteThread(threadId: string): Promise<void> {
    await this.db.query(DELETE_THREAD, [this.tenantOf({}), threadId]);
  }

  /**
   * The saver one run's graph gets (lent through `LENT_CHECKPOINTER_KEY`), bound to the run's
   * tenant, commit hook and attempt: one per attempt, and a call through it costs one property read
   * (its tenant check) more than one to the shared saver.
   */
  forRun(scope: CheckpointScope): RunCheckpointSaver {
    return new RunCheckpointSaver(this, scope);
  }

  /** `getTuple` for `scope`; the shared saver and a run's saver share it. */
  async getTupleIn(scope: CheckpointScope, config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    const { tenantId } = scope;
    if (await this.nothingStoredFor(scope, String(threadId))) return undefined;
    const ns = config.configurable?.checkpoint_ns ?? "";
    const checkpointId = getCheckpointId(config);
    const params = [tenantId, String(threadId), ns, ...(checkpointId ? [checkpointId] : [])];
    const rows = await this.db.query<CheckpointRow>(checkpointId ? SELECT_TUPLE_BY_ID : SELECT_LATEST_TUPLE, params);
    const [tuple] = await this.toTuples(tenantId, rows, namedTenant(config));
    return tuple;
  }

  /** `list` for `scope`. */
  async *listIn(scope: CheckpointScope, config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const threadId = config.configurable?.thread_id;
    const { tenantId } = scope;
    if (threadId !== undefined && threadId !== null && (await this.nothingStoredFor(scope, String(threadId)))) return;
    const { sql, params } = listQuery(tenantId, config, options);
    const rows = await this.db.query<CheckpointRow>(sql, params);
    yield* await this.toTuples(tenantId, rows, namedTenant(config));
  }

  /** `put` for `scope` (no channel versions: the whole checkpoint is stored, not per-channel blobs). */
  async putIn(
    scope: CheckpointScope,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
  ): Promise<RunnableConfig> {
    const threadId = requiredThreadId(config, "put a checkpoint");
    const { tenantId } = scope;
    const ns = config.configurable?.checkpoint_ns ?? "";
    const [[type, bytes], metadataJson] = await Promise.all([
      this.serde.dumpsTyped(checkpoint),
      this.dumpMetadata(withRunMetadata(config, metadata)),
    ]);
    assertStorableState(type, bytes, "the checkpoint");
    const parentId = config.configurable?.checkpoint_id || null;
    const commit: CheckpointTarget = { kind: "checkpoint", checkpointNs: ns, step: metadata.step };
    const write = checkpointWrite([tenantId, threadId, ns, checkpoint.id, parentId, type, bytes, metadataJson]);
    await this.write(scope, write, commit, metadata.source === "input");
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id, ...namedTenant(config) } };
  }

  /** `putWrites` for `scope`. */
  async putWritesIn(scope: CheckpointScope, config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    const threadId = requiredThreadId(config, "put writes");
    const { tenantId } = scope;
    const checkpointId = config.configurable?.checkpoint_id;
    if (!checkpointId) throw new Error('Failed to put writes: config.configurable has no "checkpoint_id".');
    const rows = await Promise.all(
      dedupeByIndex(writes).map(async ({ idx, channel, value }) => {
        const [type, bytes] = await this.serde.dumpsTyped(value);
        assertStorableState(type, bytes, `the write to channel "${channel}"`);
        return [idx, channel, type, bytes] as const;
      }),
    );
    if (rows.length === 0) return;
    const ns = config.configurable?.checkpoint_ns ?? "";
    const write = taskWrites({ tenantId, threadId, ns, checkpointId: String(checkpointId), taskId, taskPath }, rows);
    await this.write(scope, write, { kind: "writes", taskId, channels: rows.map(([, channel]) => channel) });
  }

  /** Commits an attempt's deferred writes inside the caller's transaction (the run's settle). */
  async flushDeferred(tx: Queryable, attempt: AttemptCheckpoints): Promise<void> {
    await writeAll(tx, attempt.deferred.splice(0));
  }

  /**
   * Commits what the attempt holds now, with other runs' writes (the group commit), after any flush
   * already started: before a read, and before a task of graph code starts (`TaskStartBarrier`).
   */
  async commitHeld(attempt: AttemptCheckpoints): Promise<void> {
    attempt.flushing = attempt.flushing.then(async () => {
      await Promise.all(attempt.deferred.splice(0).map((write) => this.batcher.write(write)));
    });
    await attempt.flushing;
  }

  /**
   * One checkpoint write: when the run's commit hook covers it, in a transaction with the hook
   * (and any deferred writes before it, to keep their order); else held when the attempt holds it
   * (`AttemptCheckpoints.holds`); else through the group commit, with the writes held before it
   * and whatever other runs write at the same moment.
   */
  private async write(scope: CheckpointScope, write: CheckpointWrite, commit: CheckpointTarget, input = false): Promise<void> {
    const { attempt, commitHook: hook } = scope;
    if (attempt) attempt.knownEmpty = false;
    if (hook?.covers(commit)) {
      await this.db.transaction(async (tx) => {
        if (attempt) await this.flushDeferred(tx, attempt);
        await writeAll(tx, [write]);
        await hook.onCommit(tx, commit);
      });
    } else if (attempt?.holds(commit, input)) {
      attempt.deferred.push(write);
    } else {
      // Submitted in one turn, the writes held before this one share its statement, in order.
      await Promise.all([...(attempt?.deferred.splice(0) ?? []), write].map((each) => this.batcher.write(each)));
    }
  }

  /**
   * Before a read: true when the attempt knows the thread holds nothing; else its deferred
   * writes are committed first, so the read sees them.
   */
  private async nothingStoredFor({ attempt }: CheckpointScope, threadId: string): Promise<boolean> {
    if (!attempt) return false;
    if (attempt.knownEmpty && attempt.threadId === threadId) return true;
    await this.commitHeld(attempt);
    return false;
  }

  /** A call to the shared saver acts for the tenant its config names; never with a run's hook or attempt. */
  private scopeOf(config: RunnableConfig): CheckpointScope {
    return { tenantId: this.tenantOf(config) };
  }

  /** The tenant a call names in `configurable` (`TENANT_KEY`), else the saver's own; none is an error. */
  private tenantOf(config: RunnableConfig): string {
    const named = config.configurable?.[TENANT_KEY] as unknown;
    if (typeof named === "string") return named;
    if (named !== undefined && named !== null) throw new Error(`config.configurable.${TENANT_KEY} must be a string`);
    if (this.tenantId === null) throw new Error(`this checkpoint saver needs config.configurable.${TENANT_KEY}: no tenant was named`);
    return this.tenantId;
  }

  /** Metadata goes through serde (so LangChain objects survive) and is stored as jsonb text. */
  private async dumpMetadata(metadata: Record<string, unknown>): Promise<string> {
    const [, bytes] = await this.serde.dumpsTyped(metadata);
    return stripNulEscapes(serdeWrote(new TextDecoder().decode(bytes), "the checkpoint's metadata"));
  }

  private async toTuples(tenantId: string, rows: CheckpointRow[], named: TenantNamed): Promise<CheckpointTuple[]> {
    const tuples = await Promise.all(rows.map((row) => this.toTuple(row, named)));
    await this.migratePendingSends(tenantId, tuples);
    return tuples;
  }

  /**
   * The tuple's configs name the tenant the read named: LangGraph calls the saver again with
   * them (the ancestor walk of getDeltaChannelHistory follows `parentConfig`), and a saver that
   * needs a tenant would refuse them otherwise.
   */
  private async toTuple(row: CheckpointRow, named: TenantNamed): Promise<CheckpointTuple> {
    const [checkpoint, metadata, pendingWrites] = await Promise.all([
      this.serde.loadsTyped(row.checkpoint_type, toBytes(row.checkpoint)) as Promise<Checkpoint>,
      this.serde.loadsTyped("json", row.metadata) as Promise<CheckpointMetadata>,
      this.loadWrites(parseJson<StoredWrite[]>(row.pending_writes)),
    ]);
    const at = (checkpointId: string) => ({
      configurable: { thread_id: row.thread_id, checkpoint_ns: row.checkpoint_ns, checkpoint_id: checkpointId, ...named },
    });
    const tuple: CheckpointTuple = { config: at(row.checkpoint_id), checkpoint, metadata, pendingWrites };
    if (row.parent_checkpoint_id !== null) tuple.parentConfig = at(row.parent_checkpoint_id);
    return tuple;
  }

  private loadWrites(stored: StoredWrite[]): Promise<CheckpointPendingWrite[]> {
    return Promise.all(
      stored.map(async ([taskId, channel, type, value]): Promise<CheckpointPendingWrite> => {
        const loaded: unknown = await this.serde.loadsTyped(type, toBytes(Buffer.from(value, "base64")));
        return [taskId, channel, loaded];
      }),
    );
  }

  /**
   * Checkpoints older than format v4 kept pending sends (`Send`s) in the checkpoint; v4 moved them to
   * the TASKS channel, filled from the parent's TASKS writes. Rebuilt on read, like the reference
   * savers: one extra query, only when a page holds a legacy checkpoint.
   */
  private async migratePendingSends(tenantId: string, tuples: CheckpointTuple[]): Promise<void> {
    const legacy = tuples.filter((tuple) => tuple.checkpoint.v < 4 && tuple.parentConfig !== undefined);
    if (legacy.length === 0) return;
    const parents = legacy.map((tuple) => tuple.parentConfig?.configurable);
    const rows = await this.db.query<PendingSendRow>(SELECT_PENDING_SENDS, [JSON.stringify(parents), TASKS, tenantId]);
    for (const tuple of legacy) {
      const parent = tuple.parentConfig?.configurable ?? {};
      const mine = rows.filter(
        (row) =>
          row.thread_id === parent.thread_id && row.checkpoint_ns === parent.checkpoint_ns && row.checkpoint_id === parent.checkpoint_id,
      );
      if (mine.length === 0) continue; // nothing was pending: leave the channel absent, as PostgresSaver does
      const sends = await Promise.all(mine.map((row) => this.serde.loadsTyped(row.value_type, toBytes(row.value))));
      this.applyPendingSends(tuple.checkpoint, sends);
    }
  }

  private applyPendingSends(checkpoint: Checkpoint, sends: unknown[]): void {
    const versions = Object.values(checkpoint.channel_versions ?? {});
    checkpoint.channel_values = { ...checkpoint.channel_values, [TASKS]: sends };
    checkpoint.channel_versions = {
      ...checkpoint.channel_versions,
      [TASKS]: versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined),
    };
  }
}

/**
 * The checkpointer one run's graph uses: the shared saver's statements, for the run's tenant, hook
 * and attempt alone. Graph code holds it (`config.configurable.__pregel_checkpointer`) and can call
 * it with any config; the shared saver would take the tenant, the hook (which is handed the write's
 * transaction) and the attempt from that config. A config naming another tenant is refused rather
 * than read as this one: the same thread id may well exist in both. The fields are JS private, so
 * graph code cannot reach the shared saver or change the scope through this object.
 */
export class RunCheckpointSaver extends BaseCheckpointSaver {
  readonly #saver: RudderCheckpointSaver;
  readonly #scope: CheckpointScope;

  constructor(saver: RudderCheckpointSaver, scope: CheckpointScope) {
    super(saver.serde);
    this.#saver = saver;
    this.#scope = Object.freeze({ ...scope });
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    return this.#saver.getTupleIn(this.#scoped(config), config);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    yield* this.#saver.listIn(this.#scoped(config), config, options);
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    _newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    return this.#saver.putIn(this.#scoped(config), config, checkpoint, metadata);
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    return this.#saver.putWritesIn(this.#scoped(config), config, writes, taskId, taskPath);
  }

  /** A run never deletes a thread's checkpoints (LangGraph does not ask it to); thread delete does, over the API. */
  deleteThread(): Promise<void> {
    return Promise.reject(new Error("a run's checkpointer does not delete threads"));
  }

  override getNextVersion(current: number | undefined): number {
    return this.#saver.getNextVersion(current);
  }

  #scoped(config: RunnableConfig): CheckpointScope {
    const named = config.configurable?.[TENANT_KEY] as unknown;
    if (named !== undefined && named !== this.#scope.tenantId) {
      throw new Error(`a run's checkpointer keeps to its run's tenant: config.configurable.${TENANT_KEY} names another`);
    }
    return this.#scope;
  }
}

function isSerde(value: SerializerProtocol | CheckpointSaverOptions): value is SerializerProtocol {
  return typeof (value as Partial<SerializerProtocol>).dumpsTyped === "function";
}

/** `TENANT_KEY` as a call named it, for the configs the saver hands back; nothing when it named none. */
type TenantNamed = { [TENANT_KEY]?: string };

/**
 * A config the saver hands back names the tenant its call named, so LangGraph's next call with it
 * (updateState writes at the config `put` returned) reaches the same tenant. One that named none
 * gets none back: such configs stay exactly LangGraph's (thread, namespace, checkpoint id).
 */
function namedTenant(config: RunnableConfig): TenantNamed {
  const named = config.configurable?.[TENANT_KEY] as unknown;
  return typeof named === "string" ? { [TENANT_KEY]: named } : {};
}

function requiredThreadId(config: RunnableConfig, action: string): string {
  const threadId = config.configurable?.thread_id;
  if (threadId === undefined || threadId === null || threadId === "") {
    throw new Error(`Failed to ${action}: config.configurable has no "thread_id".`);
  }
  return String(threadId);
}

/** The WHERE clause of `list`, built from whichever of the config/options parts are present. */
function listQuery(tenantId: string, config: RunnableConfig, options: CheckpointListOptions): { sql: string; params: unknown[] } {
  const params: unknown[] = [tenantId];
  const where: string[] = ["c.tenant_id = $1"];
  const add = (predicate: (placeholder: string) => string, value: unknown) => {
    params.push(value);
    where.push(predicate(`$${params.length}`));
  };
  const { thread_id: threadId, checkpoint_ns: ns } = config.configurable ?? {};
  const checkpointId = getCheckpointId(config);
  if (threadId !== undefined && threadId !== null) add((p) => `c.thread_id = ${p}`, String(threadId));
  if (ns !== undefined && ns !== null) add((p) => `c.checkpoint_ns = ${p}`, ns);
  if (checkpointId) add((p) => `c.checkpoint_id = ${p}`, checkpointId);
  const beforeId = options.before ? getCheckpointId(options.before) : "";
  if (beforeId) add((p) => `c.checkpoint_id < ${p}`, beforeId);
  if (options.filter && Object.keys(options.filter).length > 0) {
    add((p) => `c.metadata @> ${p}::jsonb`, JSON.stringify(options.filter));
  }
  let sql = `${SELECT_TUPLE} where ${where.join(" and ")} order by c.checkpoint_id desc`;
  if (options.limit !== undefined) {
    params.push(Math.max(0, Math.floor(options.limit)));
    sql += ` limit $${params.length}`;
  }
  return { sql, params };
}

/**
 * Writes of one task, with their storage index: special channels (errors, interrupts, resumes,
 * scheduled) take the fixed negative index of WRITES_IDX_MAP, so a retry replaces them; other writes
 * keep their position. Within one call a later special write wins, as it would on a second call.
 */
function dedupeByIndex(writes: PendingWrite[]): { idx: number; channel: string; value: unknown }[] {
  const byIndex = new Map<number, { idx: number; channel: string; value: unknown }>();
  writes.forEach(([channel, value], position) => {
    const idx = WRITES_IDX_MAP[channel] ?? position;
    byIndex.set(idx, { idx, channel, value });
  });
  return [...byIndex.values()];
}

/**
 * The checkpoint's own metadata plus the run's `config.metadata` (graph_id, run_id, assistant_id...),
 * as the Python savers do, so Rudder can read a checkpoint's run from it. The checkpoint's own keys
 * win; LangSmith (`ls_`), private (`__`) and LangGraph bookkeeping keys, and values that are not plain
 * JSON, are left out.
 */
export function withRunMetadata(config: RunnableConfig, metadata: CheckpointMetadata): Record<string, unknown> {
  const fromRun: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config.metadata ?? {})) {
    if (key.startsWith("ls_") || key.startsWith("__") || EXCLUDED_METADATA_KEYS.has(key)) continue;
    if (isPlainJson(value)) fromRun[key] = value;
  }
  return { ...fromRun, ...metadata };
}

function isPlainJson(value: unknown, depth = 0): boolean {
  if (depth > 32) return false; // cycles and absurd nesting are not metadata
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((item) => isPlainJson(item, depth + 1));
  if (typeof value !== "object") return false;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(value).every((item) => isPlainJson(item, depth + 1));
}

/** jsonb cannot hold U+0000; drop its `\u0000` escapes (an escape is preceded by an even run of `\`). */
/**
 * Refuses state the rest of Rudder could not store or stream (U+0000, lone surrogates): kept out
 * of the thread's checkpoints, it cannot break every later run on the thread, which would start
 * by emitting it. The node's run fails once instead, saying where.
 */
function assertStorableState(type: string, bytes: Uint8Array, what: string): void {
  if (type !== "json") return;
  const text = serdeWrote(new TextDecoder().decode(bytes), what);
  const fault = serializedFault(text);
  if (fault) throw new UnstorableOutputError(`the graph's state cannot be stored: ${what} at ${fault.path || "/"} ${fault.problem}`);
}

/**
 * What LangGraph's serde (fast-safe-stringify) writes, instead of throwing, for a value
 * `JSON.stringify` refuses (a BigInt, a throwing `toJSON`). Stored, it replaced the whole
 * checkpoint or write with this string, and every later read of the thread failed.
 */
const SERDE_PLACEHOLDER = JSON.stringify("[unable to serialize, circular reference is too complex to analyze]");

/** `text`, serde's JSON of `what`, unless it is serde's placeholder for a value it could not write. */
function serdeWrote(text: string, what: string): string {
  if (text === SERDE_PLACEHOLDER)
    throw new UnstorableOutputError(`the graph's state cannot be stored: ${what} is not JSON (a BigInt, or a value serde cannot write)`);
  return text;
}

function stripNulEscapes(json: string): string {
  return json.replace(/(?<!\\)((?:\\\\)*)\\u0000/g, "$1");
}

/** pg returns bytea as Buffer, PGlite as Uint8Array: hand serde a plain Uint8Array either way. */
function toBytes(value: Uint8Array): Uint8Array {
  return value.constructor === Uint8Array ? value : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

/** json columns arrive parsed from both drivers; a string is tolerated in case a driver does not parse. */
function parseJson<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}
