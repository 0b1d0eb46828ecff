import { randomUUID } from "node:crypto";
import type { Assistant, CreateAssistantBody, JsonObject, PatchAssistantBody } from "@rudder/api";
import type { DeclaredAssistant } from "../config/config.ts";
import { contains } from "../domain/containment.ts";
import { ApiError, notFound } from "../domain/errors.ts";
import { requireUsableConfig } from "../domain/runs.ts";
import type { AssistantRepository } from "../storage/assistants.ts";
import type { Queryable } from "../storage/db.ts";
import type { GraphRegistry } from "./registry.ts";

/**
 * Every assistant a tenant can use: the default assistant of each configured graph (its id is the
 * graph id) and those declared in the config file, which are the same for all tenants and
 * read-only through the API; plus the tenant's own, stored in the database.
 */
export class AssistantCatalog {
  private readonly declared: ReadonlyMap<string, Assistant>;

  constructor(
    private readonly repository: AssistantRepository,
    private readonly graphs: GraphRegistry,
    declared: readonly DeclaredAssistant[],
    loadedAt = new Date().toISOString(),
  ) {
    const defaults = graphs.ids().map((graphId) => ({ assistant_id: graphId, graph_id: graphId, name: graphId }));
    const all = [...defaults, ...declared].map((entry) => fromDeclaration(entry, loadedAt));
    for (const assistant of all) this.requireGraph(assistant.graph_id);
    this.declared = new Map(all.map((assistant) => [assistant.assistant_id, assistant]));
  }

  /** `db`: the transaction to read a stored assistant in, when the caller has one open. */
  async get(tenantId: string, assistantId: string, db?: Queryable): Promise<Assistant> {
    const assistant = this.declared.get(assistantId) ?? (await this.repository.get(tenantId, assistantId, db));
    if (!assistant) throw notFound("assistant", assistantId);
    return assistant;
  }

  /** Whether the assistant is one of the config file's (the same for every tenant), not a tenant's own. */
  isDeclared(assistantId: string): boolean {
    return this.declared.has(assistantId);
  }

  /** Config-declared assistants first (in config order), then the tenant's own, newest first. */
  async list(
    tenantId: string,
    query: { limit: number; offset: number; graphId?: string | undefined; metadata?: JsonObject | undefined },
  ): Promise<Assistant[]> {
    const declared = [...this.declared.values()].filter(
      (assistant) =>
        (query.graphId === undefined || assistant.graph_id === query.graphId) &&
        (query.metadata === undefined || contains(assistant.metadata, query.metadata)),
    );
    const page = declared.slice(query.offset, query.offset + query.limit);
    const remaining = query.limit - page.length;
    if (remaining === 0) return page;
    const stored = await this.repository.list(tenantId, {
      ...query,
      limit: remaining,
      offset: Math.max(0, query.offset - declared.length),
    });
    return [...page, ...stored];
  }

  async create(tenantId: string, input: CreateAssistantBody): Promise<Assistant> {
    this.requireGraph(input.graph_id);
    requireUsableConfig(input.config);
    const assistantId = input.assistant_id ?? randomUUID();
    if (this.declared.has(assistantId)) throw declaredConflict(assistantId);
    const created = await this.repository.create(tenantId, assistantId, {
      graph_id: input.graph_id,
      // As a declared assistant's: the id, so a tool or card named after it without a name is named by it.
      name: input.name ?? assistantId,
      description: input.description ?? null,
      config: input.config ?? {},
      context: input.context ?? {},
      metadata: input.metadata ?? {},
    });
    if (!created) throw new ApiError("conflict", `assistant ${assistantId} already exists`);
    return created;
  }

  /** Replaces the fields given; the others keep their values. */
  async update(tenantId: string, assistantId: string, patch: PatchAssistantBody): Promise<Assistant> {
    if (this.declared.has(assistantId)) throw declaredConflict(assistantId);
    if (patch.graph_id !== undefined) this.requireGraph(patch.graph_id);
    requireUsableConfig(patch.config);
    const current = await this.repository.get(tenantId, assistantId);
    if (!current) throw notFound("assistant", assistantId);
    const updated = await this.repository.update(tenantId, assistantId, { ...current, ...definedOnly(patch) });
    if (!updated) throw notFound("assistant", assistantId);
    return updated;
  }

  async delete(tenantId: string, assistantId: string): Promise<void> {
    if (this.declared.has(assistantId)) throw declaredConflict(assistantId);
    if (!(await this.repository.delete(tenantId, assistantId))) throw notFound("assistant", assistantId);
  }

  private requireGraph(graphId: string): void {
    if (!this.graphs.has(graphId)) {
      throw new ApiError("validation_error", `graph_id "${graphId}" names no loaded graph (loaded: ${this.graphs.ids().join(", ")})`);
    }
  }
}

function fromDeclaration(entry: DeclaredAssistant, loadedAt: string): Assistant {
  return {
    assistant_id: entry.assistant_id,
    graph_id: entry.graph_id,
    name: entry.name ?? entry.assistant_id,
    description: entry.description ?? null,
    config: entry.config ?? {},
    context: entry.context ?? {},
    metadata: entry.metadata ?? {},
    created_at: loadedAt,
    updated_at: loadedAt,
  };
}

function declaredConflict(assistantId: string): ApiError {
  return new ApiError("conflict", `assistant ${assistantId} is declared by the server's config file; change it there`);
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
