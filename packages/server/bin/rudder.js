#!/usr/bin/env node
// Registers tsx so both Rudder's TypeScript sources and users' .ts graph modules load directly:
// its ESM hooks, and its CommonJS ones for a .ts graph outside any `"type": "module"` package,
// which Node loads as CommonJS (without them, Node refuses it: "Cannot require() ES Module").
import { register as registerCommonJs } from "tsx/cjs/api";
import { register } from "tsx/esm/api";

registerCommonJs();
register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
// Once a command is done nothing of Rudder's is left to finish, but graph code that ignored its
// abort signal (a node's timer or socket, after a shutdown handed its run back) would keep the
// process alive for as long as it likes: give output a moment, then exit.
setTimeout(() => process.exit(), 1000).unref();
