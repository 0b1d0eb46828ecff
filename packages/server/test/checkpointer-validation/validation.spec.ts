// Vitest entry for the conformance suite (run by ./run.ts, not by node:test).
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import initializer from "./initializer.ts";

validate(initializer);
// Opt-in in the package (getDeltaChannelHistory is Beta), but LangGraph 1.x's DeltaChannel relies on it.
deltaChannelHistoryTests(initializer);
