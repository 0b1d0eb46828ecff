import type { RunUsage } from "@rudder/api";

/** What a run has spent: counted for chat models and tools, plus what graph code reports. */
export type Usage = RunUsage;

export type Budget = { [K in keyof Usage]: number | null };

export const NO_USAGE: Usage = { model_calls: 0, tool_calls: 0, tokens: 0, cost: 0 };

const LIMIT_NAMES: Record<keyof Usage, string> = {
  model_calls: "max_model_calls",
  tool_calls: "max_tool_calls",
  tokens: "max_tokens",
  cost: "max_cost",
};

/** Thrown into graph code when a call would exceed the run's budget; the run ends failed, never retried. */
export class BudgetExceededError extends Error {
  override readonly name = "BudgetExceededError";
  readonly retryable = false;
  constructor(
    readonly limit: keyof Usage,
    spent: number,
    max: number,
  ) {
    super(`${LIMIT_NAMES[limit]} budget of ${max} exhausted (spent ${spent})`);
  }
}

/**
 * The run's shared budget (one for the run and its subgraphs). A call is refused when the
 * budget is already spent; for tokens and cost, which are known only after a call, the call that
 * crosses the budget ends the run.
 */
export class UsageMeter {
  private spent: Usage;
  private refusal: BudgetExceededError | undefined;

  /** `onExceeded`: told once, at the first refusal, so the run can be stopped whatever graph code does with the error. */
  constructor(
    private readonly budget: Budget,
    already: Usage = NO_USAGE,
    private readonly onExceeded?: (error: BudgetExceededError) => void,
  ) {
    this.spent = { ...NO_USAGE, ...already };
  }

  get usage(): Usage {
    return { ...this.spent };
  }

  /**
   * The first refusal, kept: graph code may catch the error (LangGraph's prebuilt `ToolNode` turns
   * a tool's error into a message for the model), but the run still ends on it.
   */
  get exceeded(): BudgetExceededError | undefined {
    return this.refusal;
  }

  /**
   * Before a chat-model call: refused once max_model_calls calls were made, or when max_tokens or
   * max_cost is already used up (any model call spends tokens, so it would go over).
   */
  beforeModelCall(): void {
    this.refuseIfSpent("tokens");
    this.refuseIfSpent("cost");
    this.take("model_calls", 1);
  }

  /** Before a tool call: refused once max_tool_calls calls were made (a tool's cost, if any, is reported after). */
  beforeToolCall(): void {
    this.take("tool_calls", 1);
  }

  /** After a call, or from graph code: adds what was spent and ends the run past a budget. */
  record(usage: Partial<Usage>): void {
    for (const key of Object.keys(LIMIT_NAMES) as (keyof Usage)[]) {
      const amount = usage[key];
      if (typeof amount === "number" && Number.isFinite(amount) && amount > 0) this.spent[key] += amount;
    }
    for (const key of Object.keys(LIMIT_NAMES) as (keyof Usage)[]) {
      const max = this.budget[key];
      if (max !== null && this.spent[key] > max) throw this.refuse(key, max);
    }
  }

  private take(key: "model_calls" | "tool_calls", amount: number): void {
    const max = this.budget[key];
    if (max !== null && this.spent[key] + amount > max) throw this.refuse(key, max);
    this.spent[key] += amount;
  }

  private refuseIfSpent(key: "tokens" | "cost"): void {
    const max = this.budget[key];
    if (max !== null && this.spent[key] >= max) throw this.refuse(key, max);
  }

  private refuse(key: keyof Usage, max: number): BudgetExceededError {
    const error = new BudgetExceededError(key, this.spent[key], max);
    if (!this.refusal) {
      this.refusal = error;
      this.onExceeded?.(error);
    }
    return error;
  }
}
