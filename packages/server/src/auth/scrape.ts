import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../domain/errors.ts";
import { grants } from "../domain/roles.ts";
import type { Authenticate } from "./authenticator.ts";

/** The credentials of a scrape, as they arrived (`Authorization` header, `X-Api-Key`). */
export interface ScrapeCredentials {
  readonly authorization: string | undefined;
  readonly apiKey: string | undefined;
}

/** Resolves when the caller may read metrics; throws 401/403 `ApiError`s otherwise. */
export type AuthorizeScrape = (credentials: ScrapeCredentials) => Promise<void>;

/**
 * Metrics are for the viewer role (any token or API key whose roles grant `read`), or for a
 * configured scrape token (`RUDDER_METRICS_TOKEN`): Prometheus sends it as `Authorization: Bearer
 * <token>`, compared in constant time. A scrape token is not a tenant's credential: it reads
 * metrics and nothing else.
 */
export function createScrapeAuthorizer(authenticate: Authenticate, scrapeToken: string | undefined): AuthorizeScrape {
  const expected = scrapeToken ? digest(scrapeToken) : undefined;
  return async ({ authorization, apiKey }) => {
    const bearer = bearerOf(authorization);
    if (expected && bearer !== undefined && timingSafeEqual(digest(bearer), expected)) return;
    const principal = await authenticate({ bearer, apiKey });
    if (!grants(principal.roles, "read"))
      throw new ApiError("forbidden", 'reading metrics needs a role that grants "read" (viewer), or the scrape token');
  };
}

function bearerOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw new ApiError("unauthorized", "the Authorization header must be 'Bearer <token>'");
  return match[1];
}

const digest = (text: string): Buffer => createHash("sha256").update(text).digest();
