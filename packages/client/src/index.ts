export {
  RudderClient,
  type RudderClientOptions,
  type CallOptions,
  type CreateRunParams,
  type StoreSearchParams,
  type StreamedEvent,
} from "./client.ts";
export { RudderError, type ProblemBody } from "./errors.ts";
export type { RetryOptions } from "./retry.ts";
