import { A2A_PROTOCOL_VERSION, type AgentCard } from "@a2a-js/sdk";
import { A2A_LEGACY_PROTOCOL_VERSION } from "@a2a-js/sdk/compat/v0_3";
import { LegacyRestTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { ServerCallContext, type A2ARequestHandler } from "@a2a-js/sdk/server";
import type { Assistant } from "@rudder/api";
import { VERSION } from "../../version.ts";
import type { InputTarget } from "./parts.ts";

/** The v0.3 card's shape, as the SDK's compat layer produces it. */
export type LegacyAgentCard = Awaited<ReturnType<LegacyRestTransportHandler["getAuthenticatedExtendedAgentCard"]>>;

const INPUT_MODES = ["text/plain", "application/json"];
const OUTPUT_MODES = ["application/json", "text/plain"];

/**
 * The assistant's A2A 1.0 agent card: one JSON-RPC endpoint that speaks 1.0 and 0.3 (chosen per
 * request by the `A2A-Version` header), streaming without push notifications, bearer tokens, and
 * one skill, the assistant itself.
 */
export function agentCard(
  assistant: Assistant,
  describe: { endpoint: string; inputChannels: readonly string[] | undefined; target: InputTarget },
): AgentCard {
  const name = assistant.name?.trim() || assistant.assistant_id;
  const description = assistant.description?.trim() || `Rudder assistant ${assistant.assistant_id} (graph ${assistant.graph_id})`;
  const jsonRpc = (protocolVersion: string) => ({ url: describe.endpoint, protocolBinding: "JSONRPC", tenant: "", protocolVersion });
  return {
    name,
    description,
    supportedInterfaces: [jsonRpc(A2A_PROTOCOL_VERSION), jsonRpc(A2A_LEGACY_PROTOCOL_VERSION)],
    provider: undefined,
    version: VERSION,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: {
            scheme: "Bearer",
            bearerFormat: "JWT or API key",
            description: "A Rudder token of the tenant: viewer reads tasks, operator sends and cancels",
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: INPUT_MODES,
    defaultOutputModes: OUTPUT_MODES,
    skills: [
      {
        id: assistant.assistant_id,
        name,
        description: `${description}. ${inputHelp(describe.inputChannels, describe.target)}`,
        tags: ["langgraph", assistant.graph_id],
        examples: [],
        inputModes: INPUT_MODES,
        outputModes: OUTPUT_MODES,
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/** What a caller must send, said in the skill: where text goes and which fields a data part may set. */
function inputHelp(channels: readonly string[] | undefined, target: InputTarget): string {
  const text = target.messagesChannel
    ? "Text becomes a user message on the graph's messages channel"
    : `Text sets the input field "${target.textField}"`;
  const fields = channels?.length
    ? `; a data part sets any of the input fields ${channels.join(", ")}`
    : "; a data part's fields merge into the input";
  return `${text}${fields}. A completed task's artifact holds the graph's output (data) and its answer (text).`;
}

/**
 * The same card for a 0.3 client (`url`, `protocolVersion`, `preferredTransport`), translated by
 * the SDK's compat layer. The SDK exposes that translation only through its REST handler's
 * extended-card call, so it is handed a source that answers just that call.
 */
export function legacyAgentCard(card: AgentCard): Promise<LegacyAgentCard> {
  const source: Pick<A2ARequestHandler, "getAuthenticatedExtendedAgentCard"> = { getAuthenticatedExtendedAgentCard: async () => card };
  return new LegacyRestTransportHandler(source as A2ARequestHandler).getAuthenticatedExtendedAgentCard(new ServerCallContext());
}
