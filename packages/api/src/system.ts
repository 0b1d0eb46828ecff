import { Type, type Static } from "typebox";

export const Health = Type.Object({ ok: Type.Boolean() });
export type Health = Static<typeof Health>;

export const Readiness = Type.Object({ ok: Type.Boolean(), database: Type.String(), graphs: Type.Array(Type.String()) });
export type Readiness = Static<typeof Readiness>;
