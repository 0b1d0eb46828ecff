import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { jwtVerify } from "jose";
import { runRudder, startRudder, waitForOutput } from "./support/cli.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { EXAMPLES_CONFIG } from "./support/server.ts";

const BAD_GRAPH_CONFIG = fileURLToPath(new URL("./fixtures/bad-graph.rudder.json", import.meta.url));
const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const COMMONJS_CONFIG = fileURLToPath(new URL("./fixtures/commonjs/rudder.json", import.meta.url));

/** Where `rudder dev` keeps its data in this run: a private PostgreSQL database, or a PGlite dir. */
async function devTarget() {
  const dataDir = mkdtempSync(join(tmpdir(), "rudder-dev-"));
  if (TEST_DRIVER === "postgres") {
    const database = await createTestDatabase({ migrated: false });
    await database.db.close();
    return { env: { DATABASE_URL: database.url }, dataDir, drop: () => database.drop() };
  }
  return { env: { DATABASE_URL: undefined }, dataDir, drop: async () => {} };
}

/** A `rudder dev` once it is ready: its URL, request headers with the printed dev token, and a way to start a run. */
async function devServer(child: ReturnType<typeof startRudder>) {
  const banner = await waitForOutput(child, /Dev token[^\n]*\n\s+(\S+)\n/);
  const url = /ready at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
  const token = /Dev token[^\n]*\n\s+(\S+)\n/.exec(banner)?.[1];
  assert.ok(url && token, banner);
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const createRun = async (body: Record<string, unknown>): Promise<string> => {
    const created = await fetch(`${url}/v1/runs`, { method: "POST", headers, body: JSON.stringify(body) });
    return ((await created.json()) as { run_id: string }).run_id;
  };
  return { url, headers, createRun };
}

describe(`the rudder command on ${TEST_DRIVER}`, () => {
  test("dev starts on its database, prints a working token, and stops on SIGTERM", async () => {
    const target = await devTarget();
    // With an issuer and audience required, the printed token carries them (it used to be a 401).
    const env = { ...target.env, RUDDER_JWT_SECRET: undefined, RUDDER_JWT_ISSUER: "https://issuer.example", RUDDER_JWT_AUDIENCE: "rudder" };
    const child = startRudder(["dev", "--config", EXAMPLES_CONFIG, "--port", "0", "--data-dir", target.dataDir], env);
    try {
      const banner = await waitForOutput(child, /Dev token[^\n]*\n\s+(\S+)\n/);
      const url = /ready at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
      const token = /Dev token[^\n]*\n\s+(\S+)\n/.exec(banner)?.[1];
      assert.ok(url && token, banner);
      assert.match(banner, /graphs: +echo, approval/);
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const created = await fetch(`${url}/v1/threads`, { method: "POST", headers, body: JSON.stringify({ metadata: { via: "cli" } }) });
      assert.equal(created.status, 201);
      const { thread_id } = (await created.json()) as { thread_id: string };
      const read = await fetch(`${url}/v1/threads/${thread_id}`, { headers });
      assert.deepEqual(((await read.json()) as { metadata: unknown }).metadata, { via: "cli" });
      assert.equal((await fetch(`${url}/ready`)).status, 200);

      // A client still sending a body over the limit reads its 413: the server reads the rest and
      // drops it. (Closed at once, 6–15 of 20 such uploads met a reset on this machine kind; a
      // server in the test's own process answers too late to show it.)
      const oversized = JSON.stringify({ metadata: { a: "a".repeat(8 * 1024 * 1024) } });
      for (let attempt = 0; attempt < 10; attempt++) {
        const refused = await fetch(`${url}/v1/threads`, { method: "POST", headers, body: oversized });
        assert.equal(refused.status, 413);
        assert.equal(((await refused.json()) as { code: string }).code, "payload_too_large");
      }

      // The dev secret persists in the data dir, so `rudder token` mints tokens the server accepts.
      const minted = await runRudder(["token", "--tenant", "default", "--roles", "viewer", "--data-dir", target.dataDir], env);
      assert.equal(minted.code, 0, minted.stderr);
      const list = await fetch(`${url}/v1/threads`, { headers: { authorization: `Bearer ${minted.stdout.trim()}` } });
      assert.equal(list.status, 200);
      assert.equal(((await list.json()) as unknown[]).length, 1);

      if (TEST_DRIVER === "pglite") {
        // One process at a time opens an embedded data dir: a second is refused, naming the first.
        const second = await runRudder(["migrate", "--data-dir", target.dataDir], env);
        assert.equal(second.code, 1);
        assert.match(second.stderr.trim(), new RegExp(`^rudder migrate: the data dir .* is in use by process ${child.pid}:`));
      }
    } finally {
      child.kill("SIGTERM");
      const [code] = await once(child, "close");
      assert.equal(code, 0, "SIGTERM stops the dev server cleanly");
      if (TEST_DRIVER === "pglite") {
        const after = await runRudder(["migrate", "--data-dir", target.dataDir], target.env);
        assert.equal(after.code, 0, `the dir is free once dev stopped: ${after.stderr}`);
      }
      await target.drop();
    }
  });

  test("a graph that fails to compile stops startup with a message naming it and its file", async () => {
    const target = await devTarget();
    try {
      const result = await runRudder(["dev", "--config", BAD_GRAPH_CONFIG, "--port", "0", "--data-dir", target.dataDir], target.env);
      assert.equal(result.code, 1);
      assert.match(result.stderr, /graph "lonely" in .*broken\.ts failed to compile/);
    } finally {
      await target.drop();
    }
  });

  test('a .ts graph in a package without "type": "module" (loaded as CommonJS) loads and runs', async () => {
    const target = await devTarget();
    const child = startRudder(["dev", "--config", COMMONJS_CONFIG, "--port", "0", "--data-dir", target.dataDir], target.env);
    const closed = once(child, "close");
    try {
      const { url, headers, createRun } = await devServer(child);
      const run_id = await createRun({ assistant_id: "shout", input: { message: "hi" } });
      const joined = (await (await fetch(`${url}/v1/runs/${run_id}/join?timeout=30`, { headers })).json()) as {
        status: string;
        output: unknown;
      };
      assert.deepEqual([joined.status, joined.output], ["succeeded", { message: "hi", reply: "HI!" }]);
    } finally {
      child.kill("SIGTERM");
      await closed;
      await target.drop();
    }
  });

  test("SIGTERM stops dev after the grace period though a node ignores its abort signal and keeps a timer", async () => {
    const target = await devTarget();
    const env = { ...target.env, RUDDER_SHUTDOWN_GRACE_MS: "200" };
    const child = startRudder(["dev", "--config", TESTING_CONFIG, "--port", "0", "--data-dir", target.dataDir], env);
    const closed = once(child, "close");
    try {
      const { url, headers, createRun } = await devServer(child);
      const run_id = await createRun({ assistant_id: "ignores_abort", input: { reply: "start" } });
      let status = "pending";
      while (status === "pending") {
        await new Promise((resolve) => setTimeout(resolve, 50));
        status = ((await (await fetch(`${url}/v1/runs/${run_id}`, { headers })).json()) as { status: string }).status;
      }
      assert.equal(status, "running");
      child.kill("SIGTERM");
      // The node's timer runs two minutes: the process must not wait for it (bounded well below that).
      const exited = await Promise.race([closed, new Promise((resolve) => setTimeout(() => resolve("still running"), 60_000))]);
      assert.deepEqual(exited, [0, null]);
    } finally {
      child.kill("SIGKILL");
      await closed;
      await target.drop();
    }
  });

  test("a port already in use stops startup with one line saying so", async () => {
    const target = await devTarget();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const result = await runRudder(["dev", "--port", String(port), "--data-dir", target.dataDir], target.env);
      assert.equal(result.code, 1);
      assert.equal(
        result.stderr.trim(),
        `rudder dev: cannot listen on 127.0.0.1:${port}: the address is in use (choose another with --port or PORT)`,
      );
    } finally {
      taken.close();
      await target.drop();
    }
  });

  test("a database that cannot be reached or opened stops migrate and serve with one line naming why", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve())); // nothing listens there now
    for (const command of ["migrate", "serve"]) {
      const env = {
        DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/rudder`,
        RUDDER_JWT_SECRET: "a-secret-long-enough-for-hs256-tokens!",
      };
      const result = await runRudder([command], env);
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stderr.trim(), `rudder ${command}: cannot use the database: connect ECONNREFUSED 127.0.0.1:${port}`);
    }
  });

  test("token mints a verifiable HS256 token; bad arguments are refused", async () => {
    const secret = "t".repeat(40);
    const minted = await runRudder(["token", "--tenant", "acme", "--roles", "operator,viewer", "--expires", "1h"], {
      RUDDER_JWT_SECRET: secret,
    });
    assert.equal(minted.code, 0, minted.stderr);
    const { payload } = await jwtVerify(minted.stdout.trim(), new TextEncoder().encode(secret));
    assert.deepEqual([payload.tenant_id, payload.roles], ["acme", ["operator", "viewer"]]);
    const badRole = await runRudder(["token", "--tenant", "acme", "--roles", "root"], { RUDDER_JWT_SECRET: secret });
    assert.deepEqual([badRole.code, /unknown: root/.test(badRole.stderr)], [1, true]);
    const unknown = await runRudder(["launch"]);
    assert.equal(unknown.code, 2);
    const serveWithoutAuth = await runRudder(["serve", "--config", EXAMPLES_CONFIG], {
      RUDDER_JWT_SECRET: undefined,
      DATABASE_URL: undefined,
    });
    assert.equal(serveWithoutAuth.code, 1);
    assert.match(serveWithoutAuth.stderr, /no way to authenticate/);
  });
});
