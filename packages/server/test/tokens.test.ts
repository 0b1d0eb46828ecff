import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { decodeJwt, SignJWT } from "jose";
import { mintToken, VerifiedTokens, type Principal } from "../src/auth/authenticator.ts";
import { MAX_TENANT_ID_LENGTH } from "../src/domain/limits.ts";
import { runRudder } from "./support/cli.ts";
import { assertProblem } from "./support/problem.ts";
import { startTestServer, TEST_SECRET, type TestServer } from "./support/server.ts";

/** Issue 13, rows 10-12: a tenant claim is well-formed text compared exactly; tokens must expire. */

const key = new TextEncoder().encode(TEST_SECRET);

/** A token with any claims (no exp unless given), signed with the test secret. */
function signed(claims: Record<string, unknown>, expiresIn?: string): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setIssuedAt();
  return (expiresIn ? jwt.setExpirationTime(expiresIn) : jwt).sign(key);
}

describe("tenant claims and token lifetimes", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ worker: false });
  });
  after(() => server.close());

  test("rows 10-11: tenant claims with lone surrogates, U+FFFD, U+0000, controls or over 128 characters are 401 on every route", async () => {
    // Today's bug: these all became "\ufffd" in the database, so they shared one tenant's data.
    const victim = await server.request("POST", "/v1/threads", {
      token: await mintToken(TEST_SECRET, { tenantId: "acme", roles: ["admin"] }),
      body: { metadata: { secret: "acme's" } },
    });
    assert.equal(victim.status, 201);
    const hostile = [
      "\ud800",
      "\udbff",
      "\udc00",
      "\ufffd",
      "acme\ud800",
      "a\u0000b",
      "\u0000",
      "acme\n",
      "\u001b[31m",
      "x".repeat(MAX_TENANT_ID_LENGTH + 1),
    ];
    for (const tenant of hostile) {
      const token = await mintToken(TEST_SECRET, { tenantId: tenant, roles: ["admin"] });
      for (const [method, path] of [
        ["GET", "/v1/threads"],
        ["POST", "/v1/threads"],
        ["GET", `/v1/threads/${victim.body.thread_id}`],
        ["GET", "/v1/assistants"],
      ] as const) {
        const answer = await server.request(method, path, { token, ...(method === "POST" ? { body: {} } : {}) });
        assertProblem(answer, 401, "unauthorized");
        assert.match(answer.body.detail, /"tenant_id" claim/);
      }
    }
    for (const claim of [42, ["acme"], { id: "acme" }, ""]) {
      assertProblem(
        await server.request("GET", "/v1/threads", { token: await signed({ tenant_id: claim, roles: ["admin"] }, "1h") }),
        401,
        "unauthorized",
      );
    }
  });

  test("row 10: tenant ids are compared exactly: case, spacing and Unicode normalisation name different tenants", async () => {
    const owner = await mintToken(TEST_SECRET, { tenantId: "caf\u00e9", roles: ["admin"] });
    const thread = (await server.request("POST", "/v1/threads", { token: owner, body: {} })).body.thread_id;
    assert.equal((await server.request("GET", `/v1/threads/${thread}`, { token: owner })).status, 200);
    for (const other of ["Caf\u00e9", "cafe\u0301", "caf\u00e9 ", " caf\u00e9", "x".repeat(MAX_TENANT_ID_LENGTH)]) {
      const token = await mintToken(TEST_SECRET, { tenantId: other, roles: ["admin"] });
      assertProblem(await server.request("GET", `/v1/threads/${thread}`, { token }), 404, "not_found");
      assert.deepEqual((await server.request("GET", "/v1/threads", { token })).body, []);
    }
  });

  test("row 12: a token without exp is refused (401 saying why); one with exp is accepted", async () => {
    const forever = await server.request("GET", "/v1/threads", { token: await signed({ tenant_id: "t1", roles: ["viewer"] }) });
    assertProblem(forever, 401, "unauthorized");
    assert.match(forever.body.detail, /does not expire/);
    assert.equal(
      (await server.request("GET", "/v1/threads", { token: await signed({ tenant_id: "t1", roles: ["viewer"] }, "5m") })).status,
      200,
    );
  });

  test("row 12: with RUDDER_JWT_REQUIRE_EXP=false (auth.require_exp) tokens without exp are accepted", async () => {
    const lenient = await startTestServer({ worker: false, auth: { requireExp: false } });
    try {
      assert.equal(
        (await lenient.request("GET", "/v1/threads", { token: await signed({ tenant_id: "t1", roles: ["viewer"] }) })).status,
        200,
      );
      assertProblem(
        await lenient.request("GET", "/v1/threads", { token: await signed({ tenant_id: "\ud800", roles: ["viewer"] }) }),
        401,
        "unauthorized",
      );
    } finally {
      await lenient.close();
    }
  });
});

describe("rudder token", () => {
  const secret = "token-test-secret-token-test-secret";

  test("rudder token issues tokens that expire: 12 h by default, --expires sets the lifetime; nonsense is refused", async () => {
    const lifetime = async (args: string[]) => {
      const minted = await runRudder(["token", "--tenant", "acme", "--roles", "viewer", ...args], { RUDDER_JWT_SECRET: secret });
      assert.equal(minted.code, 0, minted.stderr);
      const { exp, iat } = decodeJwt(minted.stdout.trim());
      return exp! - iat!;
    };
    assert.equal(await lifetime([]), 12 * 3600);
    assert.equal(await lifetime(["--expires", "90m"]), 90 * 60);
    for (const bad of ["never", "-1h"]) {
      const refused = await runRudder(["token", "--tenant", "acme", "--roles", "viewer", `--expires=${bad}`], {
        RUDDER_JWT_SECRET: secret,
      });
      assert.equal(refused.code, 1, `${bad}: ${refused.stdout}`);
      assert.match(refused.stderr, /--expires must be a lifetime/);
    }
    const badTenant = await runRudder(["token", "--tenant", "a\u0001b", "--roles", "viewer"], { RUDDER_JWT_SECRET: secret });
    assert.deepEqual([badTenant.code, /--tenant contains a control character/.test(badTenant.stderr)], [1, true]);
  });
});

describe("verified-token cache (issue 22: a reused token is verified once)", () => {
  const principal: Principal = { tenantId: "acme", roles: ["viewer"], subject: "s" };

  test("an entry lapses when the current second reaches exp, as jose judges expiry, and after the maximum age", () => {
    const cache = new VerifiedTokens(10, 60_000);
    const now = 1_000_000_000_000; // ms; exp is in seconds
    cache.remember("t", principal, now / 1000 + 2, now);
    assert.equal(cache.get("t", now + 1999), principal);
    assert.equal(cache.get("t", now + 2000), undefined, "expired at exp");
    cache.remember("long", principal, now / 1000 + 3600, now);
    cache.remember("no-exp", principal, undefined, now);
    assert.equal(cache.get("long", now + 59_999), principal);
    assert.equal(cache.get("long", now + 60_000), undefined, "re-verified after the maximum age");
    assert.equal(cache.get("no-exp", now + 60_000), undefined);
    cache.remember("expired", principal, now / 1000, now);
    assert.equal(cache.get("expired", now), undefined, "an already expired token is not remembered");
  });

  test("holds at most its bound, dropping the oldest first", () => {
    const cache = new VerifiedTokens(2, 60_000);
    for (const token of ["a", "b", "c"]) cache.remember(token, principal, undefined);
    assert.deepEqual(
      ["a", "b", "c"].map((token) => cache.get(token) !== undefined),
      [false, true, true],
    );
  });

  test("a cached token still answers 401 once it expires", async () => {
    const server = await startTestServer({ worker: false });
    try {
      const token = await signed({ tenant_id: "acme", roles: ["viewer"] }, "3s");
      assert.equal((await server.request("GET", "/v1/threads", { token })).status, 200);
      assert.equal((await server.request("GET", "/v1/threads", { token })).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 3100));
      const expired = await server.request("GET", "/v1/threads", { token });
      assertProblem(expired, 401, "unauthorized");
      assert.match(expired.body.detail, /expired/);
    } finally {
      await server.close();
    }
  });
});
