/**
 * The README's quick start with @rudder/client instead of curl: a thread, a run of the `echo`
 * assistant, its events as they happen, and its result. Start `npm run dev`, then:
 *
 *   RUDDER_TOKEN=<the printed dev token> node --import tsx examples/client/quickstart.ts
 *
 * RUDDER_URL defaults to http://127.0.0.1:2024 (set it if you started the server elsewhere).
 */
import { RudderClient, RudderError } from "@rudder/client";

const client = new RudderClient({ baseUrl: process.env.RUDDER_URL ?? "http://127.0.0.1:2024", token: process.env.RUDDER_TOKEN });

try {
  const thread = await client.threads.create({ metadata: { user: "ada" } });
  const run = await client.runs.create({ thread_id: thread.thread_id, assistant_id: "echo", input: { message: "hello" } });
  // The stream ends by itself when the run is terminal or paused; a dropped connection is resumed.
  for await (const event of client.runs.stream(run.run_id)) console.log(`event ${event.sequence}: ${event.event}`);
  const done = await client.runs.wait(run.run_id);
  console.log(`run ${done.status}: ${JSON.stringify(done.output)}`);
} catch (error) {
  if (!(error instanceof RudderError)) throw error;
  console.error(`${error.status} ${error.code}: ${error.detail ?? error.title}`);
  process.exitCode = 1;
}
