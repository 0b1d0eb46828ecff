import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { CallbackManager } from "@langchain/core/callbacks/manager";
import { installLinearCallbackCopy, isVerifiedCopy, langChainCopy, linearCopy } from "../src/worker/linear-callback-copy.ts";
import "../src/worker/executor.ts";

// The worker's copy of LangChain's callback managers (worker/linear-callback-copy.ts): the same
// manager as LangChain's own copy builds, for any handlers, tags and metadata, and only put in
// place over the copy it was checked against.

class NamedHandler extends BaseCallbackHandler {
  constructor(override name: string) {
    super();
  }
}

/** Everything a manager holds, keys in order, handlers by identity. */
function contents(manager: CallbackManager) {
  return {
    own: Object.keys(manager),
    parentRunId: manager.getParentRunId(),
    handlers: [...manager.handlers],
    inheritableHandlers: [...manager.inheritableHandlers],
    tags: [...manager.tags],
    inheritableTags: [...manager.inheritableTags],
    metadata: Object.entries(manager.metadata),
    metadataPrototype: Object.getPrototypeOf(manager.metadata),
    inheritableMetadata: Object.entries(manager.inheritableMetadata),
    inheritableMetadataPrototype: Object.getPrototypeOf(manager.inheritableMetadata),
  };
}

const HANDLERS = ["a", "b", "console_callback_handler", "langchain_tracer"].map((name) => new NamedHandler(name));
const KEYS = ["run_id", "thread_id", "langgraph_step", "__proto__", "constructor", "0", "10", "2", "x y", ""];

const handlerList = fc.array(fc.constantFrom(...HANDLERS), { maxLength: 5 });
const keyList = fc.array(fc.constantFrom(...KEYS), { maxLength: 12 });
/** A manager built through LangChain's own methods, as `configure` builds them, in any order of calls. */
const manager = fc
  .record({
    parentRunId: fc.option(fc.uuid(), { nil: undefined }),
    handlers: fc.array(fc.tuple(fc.constantFrom(...HANDLERS), fc.boolean()), { maxLength: 6 }),
    tags: fc.array(fc.tuple(fc.array(fc.constantFrom("t1", "t2", "t3", "langsmith:hidden"), { maxLength: 3 }), fc.boolean()), {
      maxLength: 4,
    }),
    metadata: fc.array(fc.tuple(keyList, fc.boolean(), fc.jsonValue()), { maxLength: 5 }),
    removed: keyList,
  })
  .map(({ parentRunId, handlers, tags, metadata, removed }) => {
    const built = new CallbackManager(parentRunId);
    for (const [handler, inherit] of handlers) built.addHandler(handler, inherit);
    for (const [names, inherit] of tags) built.addTags(names, inherit);
    for (const [keys, inherit, value] of metadata) {
      built.addMetadata(Object.fromEntries(keys.map((key, index) => [key, index % 2 ? value : `${key}-${index}`])), inherit);
    }
    built.removeMetadata(Object.fromEntries(removed.map((key) => [key, true])));
    return built;
  });

test("the linear copy builds what LangChain's copy builds, for any manager and extra handlers", () => {
  const original = langChainCopy();
  fc.assert(
    fc.property(manager, handlerList, fc.boolean(), (source, extra, inherit) => {
      const expected = original.call(source, extra, inherit);
      const actual = linearCopy.call(source, extra, inherit);
      assert.deepStrictEqual(contents(actual), contents(expected));
      // A copy shares no metadata object with its source or with LangChain's copy.
      assert.notEqual(actual.metadata, source.metadata);
      assert.notEqual(actual.inheritableMetadata, source.inheritableMetadata);
    }),
    { numRuns: 2000 },
  );
});

test("the worker's process copies with the linear copy over the LangChain release it was checked against", () => {
  // executor.ts installed it on import; a second install is the same.
  assert.equal(installLinearCallbackCopy(), true);
  assert.equal(CallbackManager.prototype.copy, linearCopy);
  // If this fails after an upgrade of @langchain/core, its copy changed: compare the new text with
  // `linearCopy`, carry over what changed, and update VERIFIED_COPY_SHA256.
  assert.equal(isVerifiedCopy(langChainCopy()), true, "LangChain's CallbackManager.copy is not the one linearCopy was checked against");
});

test("a copy that is not the verified one is left in place", () => {
  assert.equal(
    isVerifiedCopy(function copy() {
      return undefined;
    }),
    false,
  );
  assert.equal(isVerifiedCopy(linearCopy), false);
});
