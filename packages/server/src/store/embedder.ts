import { pathToFileURL } from "node:url";
import type { EmbedderSpec } from "../config/config.ts";
import { ConfigError } from "../config/config.ts";
import type { Embedder } from "./service.ts";

type EmbedFunction = (texts: string[]) => Promise<number[][]>;

/**
 * The embedder named by `store.index.embed` ("./embed.ts:embed", as langgraph.json names it):
 * a LangChain `Embeddings` (anything with `embedDocuments` and `embedQuery`), or a function
 * `(texts: string[]) => Promise<number[][]>`.
 */
export async function loadEmbedder(spec: EmbedderSpec): Promise<Embedder> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(spec.file).href)) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError(`store.index.embed: importing ${spec.file} failed: ${(error as Error).message}`);
  }
  const exported = module[spec.exportName];
  if (isEmbeddings(exported)) return exported;
  if (typeof exported === "function") {
    const embed = exported as EmbedFunction;
    return {
      embedDocuments: (texts) => embed(texts),
      embedQuery: async (text) => {
        const [vector] = await embed([text]);
        return vector ?? [];
      },
    };
  }
  throw new ConfigError(
    `store.index.embed: ${spec.file} export "${spec.exportName}" is neither an Embeddings object nor a function (texts) => Promise<number[][]>`,
  );
}

function isEmbeddings(value: unknown): value is Embedder {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Embedder).embedDocuments === "function" &&
    typeof (value as Embedder).embedQuery === "function"
  );
}
