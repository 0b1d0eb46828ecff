import { readFileSync } from "node:fs";

/** The server package's version, for the OpenAPI document and `rudder --version`. */
export const VERSION: string = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;
