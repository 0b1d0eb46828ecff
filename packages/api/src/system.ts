import { Type, type Static } from "typebox";

export const Health = Type.Object({ ok: Type.Boolean() });
export type Health = Static<typeof Health>;

export const Readiness = Type.Object({ ok: Type.Boolean(), database: Type.String(), graphs: Type.Array(Type.String()) });
export type Readiness = Static<typeof Readiness>;

/** GET /metrics: Prometheus' text exposition format (version 0.0.4). */
export const MetricsText = Type.String({ description: "Prometheus text exposition format 0.0.4" });
export type MetricsText = Static<typeof MetricsText>;
