import { Type, type Static } from "typebox";
import { JsonObject, Pagination, Timestamp } from "./common.ts";

export const Assistant = Type.Object(
  {
    assistant_id: Type.String(),
    graph_id: Type.String(),
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    config: JsonObject,
    context: JsonObject,
    metadata: JsonObject,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Assistant" },
);
export type Assistant = Static<typeof Assistant>;

export const AssistantIdParams = Type.Object(
  { assistant_id: Type.String({ minLength: 1, maxLength: 128 }) },
  { additionalProperties: false },
);
export type AssistantIdParams = Static<typeof AssistantIdParams>;

/** The fields a create may set and a patch may replace. */
const editable = {
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  description: Type.Optional(Type.Union([Type.String({ maxLength: 4096 }), Type.Null()])),
  config: Type.Optional(JsonObject),
  context: Type.Optional(JsonObject),
  metadata: Type.Optional(
    Type.Object(
      {
        mcp_expose: Type.Optional(Type.Boolean({ description: "expose this assistant as an MCP tool" })),
        mcp_tool_name: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
        name: Type.Optional(Type.String()),
      },
      { additionalProperties: true },
    ),
  ),
};

/** An assistant id a client may choose: a letter or digit, then up to 127 of these. */
export const ASSISTANT_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$";

export const CreateAssistantBody = Type.Object(
  {
    assistant_id: Type.Optional(Type.String({ pattern: ASSISTANT_ID_PATTERN })),
    graph_id: Type.String({ minLength: 1 }),
    ...editable,
  },
  { additionalProperties: false },
);
export type CreateAssistantBody = Static<typeof CreateAssistantBody>;

export const PatchAssistantBody = Type.Object(
  { graph_id: Type.Optional(Type.String({ minLength: 1 })), ...editable },
  { additionalProperties: false },
);
export type PatchAssistantBody = Static<typeof PatchAssistantBody>;

export const ListAssistantsQuery = Type.Object(
  {
    ...Pagination,
    graph_id: Type.Optional(Type.String({ minLength: 1 })),
    metadata: Type.Optional(Type.String({ description: "JSON object; assistants whose metadata contains it" })),
  },
  { additionalProperties: false },
);
export type ListAssistantsQuery = Static<typeof ListAssistantsQuery>;
