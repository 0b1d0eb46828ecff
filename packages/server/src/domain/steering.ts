/** Steering payload plus metadata, serialised, may take at most this many bytes (DESIGN.md). */
export const STEERING_MAX_BYTES = 32 * 1024;

/** The spec's size rule: UTF-8 bytes of JSON(payload) plus JSON(metadata ?? {}). */
export function steeringSize(payload: unknown, metadata: Record<string, unknown> | undefined): number {
  return Buffer.byteLength(JSON.stringify(payload) ?? "null", "utf8") + Buffer.byteLength(JSON.stringify(metadata ?? {}), "utf8");
}
