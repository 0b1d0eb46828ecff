import type { Readiness } from "@rudder/api";
import type { Authenticate } from "../auth/authenticator.ts";
import type { AuthorizeScrape } from "../auth/scrape.ts";
import type { AssistantCatalog } from "../graphs/assistants.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import type { GraphSchemaCatalog } from "../graphs/schemas.ts";
import type { McpSessions } from "../gateways/mcp/session.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { A2ATaskService } from "../runs/a2a-tasks.ts";
import type { RunService } from "../runs/service.ts";
import type { SteeringService } from "../runs/steering.ts";
import type { ScheduleService } from "../scheduler/service.ts";
import type { StoreService } from "../store/service.ts";
import type { ThreadService } from "../threads/service.ts";

/**
 * What the routes need, built once by the server (the composition root) and handed to the app:
 * services only, never storage, so every route reaches the backend the same way.
 */
export interface AppServices {
  readonly authenticate: Authenticate;
  readonly assistants: AssistantCatalog;
  /** The graphs' input and output JSON Schemas, for the MCP gateway's tools. */
  readonly graphSchemas: GraphSchemaCatalog;
  /** Opens MCP sessions and checks that a request's session is its principal's. */
  readonly mcpSessions: McpSessions;
  readonly threads: ThreadService;
  readonly runService: RunService;
  readonly steeringService: SteeringService;
  readonly schedules: ScheduleService;
  /** A2A tasks over runs, for the A2A gateway. */
  readonly a2aTasks: A2ATaskService;
  /** The loaded graphs (the LangGraph facade draws them and describes their schemas). */
  readonly graphs: GraphRegistry;
  /** The long-term store, per tenant. */
  readonly store: StoreService;
  readonly notifier: Notifier;
  /** Throws when the database does not answer; otherwise what /ready reports. */
  readonly readiness: () => Promise<Omit<Readiness, "ok">>;
  /** A quiet SSE stream gets a `: heartbeat` comment this often. */
  readonly streamHeartbeatMs: number;
  /** This process's metrics: the app records requests and streams, GET /metrics serves them. */
  readonly metrics: Metrics;
  /** Who may read GET /metrics: the viewer role or the scrape token. */
  readonly authorizeScrape: AuthorizeScrape;
}
