import { existsSync } from "node:fs";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { acceptedClaimsOf, mintToken } from "../auth/authenticator.ts";
import { ConfigError, resolveConfig } from "../config/config.ts";
import { isRole, type Role } from "../domain/roles.ts";
import { tenantIdProblem } from "../domain/tenants.ts";
import type { CliValues } from "./options.ts";
import { devSecret } from "./serve.ts";

export async function runToken(values: CliValues): Promise<number> {
  const config = resolveConfig({ dataDir: values["data-dir"], config: values.config });
  if (!values.tenant) throw new ConfigError("--tenant is required");
  const tenantProblem = tenantIdProblem(values.tenant);
  if (tenantProblem) throw new ConfigError(`--tenant ${tenantProblem}`);
  const roles = (values.roles ?? "")
    .split(",")
    .map((role) => role.trim())
    .filter(Boolean);
  const unknown = roles.filter((role) => !isRole(role));
  if (roles.length === 0 || unknown.length > 0) {
    throw new ConfigError(
      `--roles must list some of viewer, operator, developer, admin${unknown.length ? ` (unknown: ${unknown.join(", ")})` : ""}`,
    );
  }
  const hasDevSecret = existsSync(join(config.dataDir, "dev-secret"));
  const secret = config.auth.jwtSecret ?? (hasDevSecret ? devSecret(config.dataDir) : undefined);
  if (!secret) throw new ConfigError("set RUDDER_JWT_SECRET (or run `rudder dev` once to create a dev secret)");
  const expires = values.expires ?? "12h";
  const token = await mintToken(secret, {
    tenantId: values.tenant,
    roles: roles as Role[],
    expiresIn: expires,
    ...(values.subject ? { subject: values.subject } : {}),
    ...acceptedClaimsOf(config.auth),
  }).catch((error: unknown) => {
    // jose refuses a lifetime it cannot read with a TypeError.
    if (error instanceof TypeError) throw new ConfigError(`--expires must be a lifetime like 30m, 12h or 7d, not "${expires}"`);
    throw error;
  });
  const { exp = 0, iat = 0 } = decodeJwt(token);
  if (exp <= iat) throw new ConfigError(`--expires must be a lifetime in the future, not "${expires}"`);
  process.stdout.write(`${token}\n`);
  return 0;
}
