import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { Serialized } from "@langchain/core/load/serializable";
import type { LLMResult } from "@langchain/core/outputs";
import type { UsageMeter } from "../domain/budget.ts";

/** Price of a model's tokens, in the unit the run's max_cost is given in. */
export interface ModelPrice {
  readonly input_per_token: number;
  readonly output_per_token: number;
}

/**
 * Counts a run's chat-model calls, tokens and tool calls through LangChain callbacks, which reach
 * every model and tool the graph and its subgraphs call. `raiseError` makes a refusal (the
 * budget's error) fail the call itself instead of being logged and ignored.
 */
export class BudgetCallbackHandler extends BaseCallbackHandler {
  name = "rudder_budget";
  override raiseError = true;
  override awaitHandlers = true;
  private readonly modelOf = new Map<string, string>();

  constructor(
    private readonly meter: UsageMeter,
    private readonly prices: Readonly<Record<string, ModelPrice>> = {},
  ) {
    // Only model and tool calls count: ignoring chain, retriever and custom events spares every
    // runnable a chain start and end dispatched (and awaited) to this handler.
    super({ ignoreChain: true, ignoreRetriever: true, ignoreCustomEvent: true });
  }

  override handleChatModelStart(
    _llm: Serialized,
    _messages: unknown,
    runId: string,
    _parent?: string,
    _extra?: unknown,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): void {
    this.meter.beforeModelCall();
    if (typeof metadata?.ls_model_name === "string") this.modelOf.set(runId, metadata.ls_model_name);
  }

  override handleLLMStart(
    _llm: Serialized,
    _prompts: string[],
    runId: string,
    _parent?: string,
    _extra?: unknown,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): void {
    this.meter.beforeModelCall();
    if (typeof metadata?.ls_model_name === "string") this.modelOf.set(runId, metadata.ls_model_name);
  }

  override handleLLMEnd(output: LLMResult, runId: string): void {
    const { input, output: out } = tokensOf(output);
    const price = this.prices[this.modelOf.get(runId) ?? ""];
    this.modelOf.delete(runId);
    this.meter.record({ tokens: input + out, cost: price ? input * price.input_per_token + out * price.output_per_token : 0 });
  }

  override handleToolStart(): void {
    this.meter.beforeToolCall();
  }
}

/** Token counts from a model result: the message's usage_metadata, else the provider's tokenUsage. */
function tokensOf(result: LLMResult): { input: number; output: number } {
  let input = 0;
  let output = 0;
  for (const generation of result.generations.flat()) {
    const usage = (generation as { message?: { usage_metadata?: { input_tokens?: number; output_tokens?: number } } }).message
      ?.usage_metadata;
    input += usage?.input_tokens ?? 0;
    output += usage?.output_tokens ?? 0;
  }
  if (input + output === 0) {
    const tokenUsage = (result.llmOutput as { tokenUsage?: { promptTokens?: number; completionTokens?: number } } | undefined)?.tokenUsage;
    input = tokenUsage?.promptTokens ?? 0;
    output = tokenUsage?.completionTokens ?? 0;
  }
  return { input, output };
}
