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
