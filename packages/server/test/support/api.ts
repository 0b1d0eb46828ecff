import assert from "node:assert/strict";
import type { RunEvent } from "@rudder/api";

export type { RunEvent };

/** A small JSON client for a server in another process (tests that spawn `rudder`). */
export function apiClient(url: string, token: string) {
  return async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  };
}
export type Api = ReturnType<typeof apiClient>;

/** The run's whole event log, page by page. */
export async function allEvents(api: Api, runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (;;) {
    const page = await api<RunEvent[]>("GET", `/v1/runs/${runId}/events?after=${events.length ? events.at(-1)!.sequence : 0}&limit=1000`);
    assert.equal(page.status, 200, JSON.stringify(page.body));
    events.push(...page.body);
    if (page.body.length < 1000) return events;
  }
}

/** Maps `items` through `fn`, at most `limit` at a time, keeping the order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!, index);
    }
  });
  await Promise.all(lanes);
  return results;
}
