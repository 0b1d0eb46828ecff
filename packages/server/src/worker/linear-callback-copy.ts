// How the worker's process copies LangChain callback managers: with their metadata in one pass.
import { createHash } from "node:crypto";
import type { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { CallbackManager } from "@langchain/core/callbacks/manager";

type Copy = (this: CallbackManager, additionalHandlers?: BaseCallbackHandler[], inherit?: boolean) => CallbackManager;

/**
 * The SHA-256 of the source text of `CallbackManager.prototype.copy` in the `@langchain/core`
 * releases whose copy `linearCopy` was checked against (1.4.x). Any other text is left alone.
 */
export const VERIFIED_COPY_SHA256 = "3db910c718ee25f01548e12353dd719adbd631a16e4eabde564615f067fbcc27";

/**
 * LangChain's `CallbackManager.copy`, with the metadata copied in one pass: the same manager (the
 * same handlers, tags, metadata and inheritable metadata, keys in the same order), built in time
 * linear in the number of metadata keys.
 *
 * Why: LangChain's copy adds the metadata one key at a time, each through `addMetadata`, which
 * spreads the whole object again, and looks the key up in a fresh `Object.keys` of the inheritable
 * metadata: quadratic in the keys. It runs for every runnable a step invokes (23–29 copies per
 * trivial Rudder run), and a run's metadata has 12 keys (LangGraph's seven, Rudder's five, as
 * `runConfig` sets them) plus the user's: on Node 24, `addMetadata` and `copy` were 8.5 % of the
 * server's CPU at c=50 on PostgreSQL, the largest function in the profile; one copy of such a
 * manager took 4.1 µs there, and 0.7 µs in one pass (docs/benchmarks.md, "twenty-third pass").
 *
 * Handlers and tags are copied exactly as LangChain copies them (a few each). Built with
 * `Object.fromEntries`, so a key named `__proto__` stays an own key, as LangChain's spreads keep it.
 */
export function linearCopy(this: CallbackManager, additionalHandlers: BaseCallbackHandler[] = [], inherit = true): CallbackManager {
  const manager = new CallbackManager(this.getParentRunId());
  for (const handler of this.handlers) manager.addHandler(handler, this.inheritableHandlers.includes(handler));
  for (const tag of this.tags) manager.addTags([tag], this.inheritableTags.includes(tag));
  const inheritableKeys = new Set(Object.keys(this.inheritableMetadata));
  const entries = Object.keys(this.metadata).map((key): [string, unknown] => [key, this.metadata[key]]);
  manager.metadata = Object.fromEntries(entries);
  manager.inheritableMetadata = Object.fromEntries(entries.filter(([key]) => inheritableKeys.has(key)));
  for (const handler of additionalHandlers) {
    const consoleHandlers = manager.handlers.filter((existing) => existing.name === "console_callback_handler");
    if (consoleHandlers.some((existing) => existing.name === handler.name)) continue;
    manager.addHandler(handler, inherit);
  }
  return manager;
}

/** Whether `copy` is the text `linearCopy` was checked against. */
export function isVerifiedCopy(copy: (...args: never[]) => unknown): boolean {
  return createHash("sha256").update(copy.toString()).digest("hex") === VERIFIED_COPY_SHA256;
}

/** LangChain's own copy, kept once replaced: the tests compare the two. */
let original: Copy | undefined;

/** LangChain's `CallbackManager.copy` as this process loaded it, before `installLinearCallbackCopy`. */
export function langChainCopy(): Copy {
  return original ?? (CallbackManager.prototype.copy as Copy);
}

/**
 * Puts `linearCopy` on LangChain's `CallbackManager`, once, when its copy is the verified one
 * (`VERIFIED_COPY_SHA256`); returns whether the linear copy is in place. Another release's copy is
 * kept as it is: it may copy something this one does not know of. Graph code's own copies of
 * `@langchain/core`, if any, are not touched.
 */
export function installLinearCallbackCopy(): boolean {
  const current = CallbackManager.prototype.copy as Copy;
  if (current === linearCopy) return true;
  if (!isVerifiedCopy(current)) return false;
  original = current;
  CallbackManager.prototype.copy = linearCopy;
  return true;
}
