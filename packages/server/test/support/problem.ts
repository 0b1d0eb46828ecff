import assert from "node:assert/strict";
import { ERROR_CODES, type ErrorCode } from "../../src/domain/errors.ts";

const PROBLEM_FIELDS = ["type", "title", "status", "detail", "code", "request_id", "retryable"];

/** An answer is the problem+json the spec requires, with this status and code. */
export function assertProblem(response: { status: number; headers: Headers; body: unknown }, status: number, code: ErrorCode): void {
  const body = response.body as Record<string, unknown>;
  assert.equal(response.status, status, JSON.stringify(body));
  assert.match(response.headers.get("content-type") ?? "", /^application\/problem\+json/);
  for (const field of PROBLEM_FIELDS) assert.ok(field in body, `problem has ${field}`);
  assert.equal(body.type, "about:blank");
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.retryable, ERROR_CODES[code].retryable);
  if (response.headers.get("x-request-id")) assert.equal(body.request_id, response.headers.get("x-request-id"));
}
