import type { Assistant } from "@rudder/api";
import type { Db, Queryable } from "./db.ts";
import { iso, json } from "./rows.ts";

/** What a stored assistant holds besides its id and timestamps. */
export type AssistantFields = Pick<Assistant, "graph_id" | "name" | "description" | "config" | "context" | "metadata">;

interface AssistantRow extends Omit<Assistant, "created_at" | "updated_at"> {
  created_at: Date | string;
  updated_at: Date | string;
}

const COLUMNS = "assistant_id, graph_id, name, description, config, context, metadata, created_at, updated_at";

const toAssistant = (row: AssistantRow): Assistant => ({
  ...row,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/** The parameters $1..$8 of an assistant row, in the order create and update bind them. */
function rowParams(tenantId: string, assistantId: string, fields: AssistantFields): unknown[] {
  return [
    tenantId,
    assistantId,
    fields.graph_id,
    fields.name,
    fields.description,
    json(fields.config),
    json(fields.context),
    json(fields.metadata),
  ];
}

/** Assistants a tenant created through the API (config-declared ones live in the catalog). */
export class AssistantRepository {
  constructor(private readonly db: Db) {}

  /** Returns undefined when the tenant already has an assistant with this id. */
  async create(tenantId: string, assistantId: string, fields: AssistantFields): Promise<Assistant | undefined> {
    const [row] = await this.db.query<AssistantRow>(
      `insert into assistants (tenant_id, assistant_id, graph_id, name, description, config, context, metadata)
       values ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::jsonb)
       on conflict (tenant_id, assistant_id) do nothing
       returning ${COLUMNS}`,
      rowParams(tenantId, assistantId, fields),
    );
    return row && toAssistant(row);
  }

  /** `db`: a transaction to read in (PGlite has one connection: a read outside an open transaction would wait for it). */
  async get(tenantId: string, assistantId: string, db: Queryable = this.db): Promise<Assistant | undefined> {
    const [row] = await db.query<AssistantRow>(`select ${COLUMNS} from assistants where tenant_id = $1 and assistant_id = $2`, [
      tenantId,
      assistantId,
    ]);
    return row && toAssistant(row);
  }

  async update(tenantId: string, assistantId: string, fields: AssistantFields): Promise<Assistant | undefined> {
    const [row] = await this.db.query<AssistantRow>(
      `update assistants set graph_id = $3, name = $4, description = $5, config = $6::jsonb,
              context = $7::jsonb, metadata = $8::jsonb, updated_at = now()
        where tenant_id = $1 and assistant_id = $2
        returning ${COLUMNS}`,
      rowParams(tenantId, assistantId, fields),
    );
    return row && toAssistant(row);
  }

  async delete(tenantId: string, assistantId: string): Promise<boolean> {
    const rows = await this.db.query("delete from assistants where tenant_id = $1 and assistant_id = $2 returning 1", [
      tenantId,
      assistantId,
    ]);
    return rows.length > 0;
  }

  /** Newest first, optionally only those of one graph or whose metadata contains an object. */
  async list(
    tenantId: string,
    query: { limit: number; offset: number; graphId?: string | undefined; metadata?: Record<string, unknown> | undefined },
  ): Promise<Assistant[]> {
    const rows = await this.db.query<AssistantRow>(
      `select ${COLUMNS} from assistants
        where tenant_id = $1 and ($2::text is null or graph_id = $2) and ($3::jsonb is null or metadata @> $3::jsonb)
        order by created_at desc, assistant_id
        limit $4 offset $5`,
      [tenantId, query.graphId ?? null, query.metadata === undefined ? null : json(query.metadata), query.limit, query.offset],
    );
    return rows.map(toAssistant);
  }
}
