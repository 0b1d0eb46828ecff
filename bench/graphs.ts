/**
 * Graphs for bench/runs.ts.
 *
 * - `ticker`: one node that waits `delay_ms` (so the SSE client is connected), then emits `count`
 *   custom events `interval_ms` apart (tick i due at the first tick + i × interval_ms, so late
 *   timers do not add up), each stamped with the emitting process's clock when it left (`t`, ms on
 *   performance.timeOrigin + performance.now(), comparable across processes of one machine) and
 *   when it was due (`s`), and numbered (`i`). With `start_at` (same clock) it also waits until then, so K runs started one
 *   after another tick together (bench/token-stream.ts).
 * - `hold`: one node that waits `hold_ms` (default ten minutes) or until the attempt is aborted (a
 *   cancel), as a run that waits on a person or a slow tool: bench/standing-load.ts keeps a
 *   thousand of them running.
 * - `oneNodeGraph()`: the uncompiled 1-node graph (same shape as examples' echo), for in-process
 *   `graph.invoke` reference figures with or without a checkpointer.
 */
import { Annotation, END, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
/** Milliseconds on a clock that processes of one machine share. */
const clock = () => performance.timeOrigin + performance.now();

const TickerState = Annotation.Root({
  count: Annotation<number>(),
  interval_ms: Annotation<number>(),
  delay_ms: Annotation<number>(),
  start_at: Annotation<number>(),
  ticks: Annotation<number>(),
});

export const ticker = new StateGraph(TickerState)
  .addNode("tick", async (state, config: LangGraphRunnableConfig) => {
    const count = state.count ?? 10;
    const interval = state.interval_ms ?? 30;
    await sleep(state.delay_ms ?? 150);
    if (state.start_at !== undefined) await sleep(state.start_at - clock());
    // Each tick has its own time, counted from the first: a timer that fires late (a busy event
    // loop) delays that tick only, not every one after it, so K runs really offer K ticks per
    // interval. (Counted from start_at instead, every run's ticks would fall due at the same instant,
    // a burst no real set of LLM streams makes.)
    const first = clock();
    for (let i = 0; i < count; i++) {
      const scheduled = first + i * interval;
      if (i > 0) await sleep(scheduled - clock());
      config.writer?.({ i, t: clock(), s: scheduled });
    }
    return { ticks: count };
  })
  .addEdge(START, "tick")
  .addEdge("tick", END)
  .compile({ name: "ticker" });

const HoldState = Annotation.Root({
  hold_ms: Annotation<number>(),
  held: Annotation<boolean>(),
});

export const hold = new StateGraph(HoldState)
  .addNode("hold", async (state, config: LangGraphRunnableConfig) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, state.hold_ms ?? 600_000);
      config.signal?.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(timer);
        config.signal?.removeEventListener("abort", done);
        resolve();
      }
    });
    return { held: true };
  })
  .addEdge(START, "hold")
  .addEdge("hold", END)
  .compile({ name: "hold" });

const EchoState = Annotation.Root({
  message: Annotation<string>(),
  reply: Annotation<string>(),
});

export function oneNodeGraph() {
  return new StateGraph(EchoState)
    .addNode("echo", (state) => ({ reply: state.message ?? "" }))
    .addEdge(START, "echo")
    .addEdge("echo", END);
}
