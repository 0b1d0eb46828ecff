#!/usr/bin/env node
// Registers tsx so both Rudder's TypeScript sources and users' .ts graph modules load directly.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
