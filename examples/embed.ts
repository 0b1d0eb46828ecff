/**
 * An embedder that works offline, for trying semantic search without a model provider: each word
 * and each word's character trigrams are hashed into one of `DIMS` buckets (feature hashing), and
 * the vector is scaled to length 1. Texts that share words or word pieces come out close. It knows
 * no meaning, so use a real model in production, e.g. in rudder.json:
 *
 *   "store": { "index": { "embed": "./embed.ts:embed", "dims": 256, "fields": ["text"] } }
 *
 * with `export const embed = new OpenAIEmbeddings({ model: "text-embedding-3-small" })` (dims 1536).
 */
export const DIMS = 256;

export async function embed(texts: string[]): Promise<number[][]> {
  return texts.map(embedOne);
}

function embedOne(text: string): number[] {
  const vector = new Array<number>(DIMS).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    vector[bucket(word)]! += 1;
    const padded = `^${word}$`;
    for (let i = 0; i + 3 <= padded.length; i += 1) vector[bucket(padded.slice(i, i + 3))]! += 0.5;
  }
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return norm === 0 ? vector : vector.map((x) => x / norm);
}

/** FNV-1a, 32 bits, modulo the dimension count. */
function bucket(token: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < token.length; i += 1) {
    hash ^= token.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % DIMS;
}
