/**
 * Rudder's wire contract, one module per resource: the TypeBox schema of every request and
 * response body, query, path and header set, with its `Static<>` type under the same name. The
 * server validates, serialises and documents (OpenAPI) with these schemas; the client and the
 * server's own services use the types. Platform-free (only `typebox`), so a browser can import it.
 */
export * from "./common.ts";
export * from "./problem.ts";
export * from "./threads.ts";
export * from "./assistants.ts";
export * from "./runs.ts";
export * from "./run-events.ts";
export * from "./steering.ts";
export * from "./schedules.ts";
export * from "./system.ts";
export * from "./langgraph.ts";
export * from "./store.ts";
