import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors as joseErrors,
  jwtVerify,
  SignJWT,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from "jose";
import type { AuthConfig } from "../config/config.ts";
import { ApiError } from "../domain/errors.ts";
import { isRole, type Role } from "../domain/roles.ts";
import { tenantIdProblem } from "../domain/tenants.ts";

/** Who is calling: the tenant every query is scoped to, and the roles that decide what it may do. */
export interface Principal {
  readonly tenantId: string;
  readonly roles: readonly Role[];
  readonly subject: string;
}

export type Authenticate = (credentials: { bearer?: string | undefined; apiKey?: string | undefined }) => Promise<Principal>;

const ASYMMETRIC_ALGORITHMS = ["RS256", "ES256"];

/** Tokens remembered as verified: a client reuses its token for many requests. */
const VERIFIED_TOKENS_MAX = 1000;
/**
 * How long a verified token is trusted without checking its signature again (never past its
 * `exp`): bounds how long a token signed by a key since removed from the JWKS keeps working.
 */
const VERIFIED_TOKEN_MAX_AGE_MS = 60_000;

/**
 * The principals of recently verified bearer tokens, keyed by the token string. Verifying an HS256
 * token (WebCrypto HMAC, claim checks) cost more CPU than the rest of a trivial request; a hit
 * costs a map lookup. An entry lapses at the token's `exp` exactly as jose judges it (expired once
 * the current second reaches `exp`) or after VERIFIED_TOKEN_MAX_AGE_MS, whichever comes first;
 * a token that failed is never remembered. Oldest entries go first when full.
 */
export class VerifiedTokens {
  private readonly entries = new Map<string, { principal: Principal; until: number }>();

  constructor(
    private readonly max = VERIFIED_TOKENS_MAX,
    private readonly maxAgeMs = VERIFIED_TOKEN_MAX_AGE_MS,
  ) {}

  get(token: string, now = Date.now()): Principal | undefined {
    const entry = this.entries.get(token);
    if (!entry) return undefined;
    if (now < entry.until) return entry.principal;
    this.entries.delete(token);
    return undefined;
  }

  remember(token: string, principal: Principal, expiresAt: number | undefined, now = Date.now()): void {
    const until = Math.min(now + this.maxAgeMs, expiresAt === undefined ? Infinity : expiresAt * 1000);
    if (!(until > now)) return;
    this.entries.delete(token);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(token, { principal, until });
  }
}

/**
 * Builds the verifier for bearer JWTs (HS256 with the shared secret; RS256/ES256 from a JWKS file
 * or URL) and configured API keys. Every failure is a 401 `unauthorized`; the detail says why.
 */
export function createAuthenticator(config: AuthConfig): Authenticate {
  const secret = config.jwtSecret ? new TextEncoder().encode(config.jwtSecret) : undefined;
  const jwks = loadJwks(config);
  const apiKeys = config.apiKeys.map((spec) => ({ ...spec, digest: Buffer.from(spec.sha256, "hex") }));
  const verified = new VerifiedTokens();

  async function verifyJwt(token: string): Promise<JWTPayload> {
    let algorithm: string | undefined;
    try {
      algorithm = decodeProtectedHeader(token).alg;
    } catch {
      throw unauthorized("the bearer token is not a valid JWT");
    }
    const options = { issuer: config.issuer, audience: config.audience };
    let payload: JWTPayload | undefined;
    try {
      if (algorithm === "HS256" && secret) {
        payload = (await jwtVerify(token, secret, { ...options, algorithms: ["HS256"] })).payload;
      } else if (algorithm && ASYMMETRIC_ALGORITHMS.includes(algorithm) && jwks) {
        payload = (await jwtVerify(token, jwks, { ...options, algorithms: ASYMMETRIC_ALGORITHMS })).payload;
      }
    } catch (error) {
      throw unauthorized(describeJoseError(error));
    }
    if (!payload) throw unauthorized(`tokens signed with ${algorithm ?? "no algorithm"} are not accepted by this server`);
    // A token without exp would be valid for ever: a leaked one could never be retired.
    if (config.requireExp && payload.exp === undefined) {
      throw unauthorized('the token does not expire (it has no "exp" claim); this server accepts only tokens that expire');
    }
    return payload;
  }

  function principalFromClaims(payload: JWTPayload): Principal {
    const tenantId = payload[config.tenantClaim];
    if (tenantId === undefined) throw unauthorized(`the token has no "${config.tenantClaim}" claim`);
    const problem = tenantIdProblem(tenantId);
    if (problem || typeof tenantId !== "string") {
      throw unauthorized(`the token's "${config.tenantClaim}" claim ${problem ?? "must be a string"}`);
    }
    const rawRoles = payload[config.rolesClaim];
    const roles = Array.isArray(rawRoles) ? rawRoles.filter((r): r is Role => typeof r === "string" && isRole(r)) : [];
    return { tenantId, roles, subject: payload.sub ?? "jwt" };
  }

  function principalFromApiKey(key: string): Principal | undefined {
    const digest = createHash("sha256").update(key).digest();
    const match = apiKeys.find((spec) => timingSafeEqual(spec.digest, digest));
    return match && { tenantId: match.tenantId, roles: match.roles, subject: `api-key:${match.sha256.slice(0, 12)}` };
  }

  const fromBearer = async (bearer: string): Promise<Principal> => {
    if (bearer.split(".").length !== 3) {
      const principal = principalFromApiKey(bearer);
      if (principal) return principal;
    }
    const known = verified.get(bearer);
    if (known) return known;
    const payload = await verifyJwt(bearer);
    const principal = principalFromClaims(payload);
    verified.remember(bearer, principal, payload.exp);
    return principal;
  };

  /**
   * `Authorization` is the credential when it is sent. An `X-Api-Key` beside it that is no Rudder
   * key is not one of ours (the LangGraph SDK sends `LANGSMITH_API_KEY` there by itself) and is
   * ignored; one that is a Rudder key must name the same principal, or the request is refused: a
   * proxy in front may have checked the other one, as with two Authorization headers.
   */
  return async ({ bearer, apiKey }) => {
    if (bearer === undefined) {
      if (apiKey === undefined) throw unauthorized("missing Authorization: Bearer <token> header");
      const principal = principalFromApiKey(apiKey);
      if (!principal) throw unauthorized("unknown API key");
      return principal;
    }
    const principal = await fromBearer(bearer);
    const keyed = apiKey === undefined ? undefined : principalFromApiKey(apiKey);
    if (keyed && !samePrincipal(keyed, principal))
      throw new ApiError("invalid_request", "Authorization and X-Api-Key name different credentials: send one of them");
    return principal;
  };
}

const samePrincipal = (a: Principal, b: Principal): boolean =>
  a.tenantId === b.tenantId && a.subject === b.subject && [...a.roles].sort().join() === [...b.roles].sort().join();

function loadJwks(config: AuthConfig): JWTVerifyGetKey | undefined {
  if (config.jwksFile) return createLocalJWKSet(JSON.parse(readFileSync(config.jwksFile, "utf8")) as JSONWebKeySet);
  if (config.jwksUrl) return createRemoteJWKSet(new URL(config.jwksUrl));
  return undefined;
}

function describeJoseError(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return "the token has expired";
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `the token's "${error.claim}" claim is not accepted`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "the token's signature does not verify";
  if (error instanceof joseErrors.JOSEError) return `the token is not valid (${error.code})`;
  return "the token is not valid";
}

function unauthorized(detail: string): ApiError {
  return new ApiError("unauthorized", detail);
}

export interface TokenRequest {
  readonly tenantId: string;
  readonly roles: readonly Role[];
  readonly subject?: string;
  /** Lifetime, e.g. "12h" or "30d" (jose's time span syntax). */
  readonly expiresIn?: string;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  readonly tenantClaim?: string;
  readonly rolesClaim?: string;
}

/** What a token must carry for a server with this auth config to accept it: its issuer, audience and claim names. */
export const acceptedClaimsOf = (auth: AuthConfig): Pick<TokenRequest, "issuer" | "audience" | "tenantClaim" | "rolesClaim"> => ({
  issuer: auth.issuer,
  audience: auth.audience,
  tenantClaim: auth.tenantClaim,
  rolesClaim: auth.rolesClaim,
});

/** Mints an HS256 token the server started with the same secret accepts. */
export async function mintToken(secret: string, request: TokenRequest): Promise<string> {
  let jwt = new SignJWT({
    [request.tenantClaim ?? "tenant_id"]: request.tenantId,
    [request.rolesClaim ?? "roles"]: [...request.roles],
  })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(request.subject ?? `rudder-token:${request.tenantId}`)
    .setIssuedAt()
    .setExpirationTime(request.expiresIn ?? "12h");
  if (request.issuer) jwt = jwt.setIssuer(request.issuer);
  if (request.audience) jwt = jwt.setAudience(request.audience);
  return jwt.sign(new TextEncoder().encode(secret));
}
