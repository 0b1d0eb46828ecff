import { isUtf8 } from "node:buffer";
import type { FastifyRequest, FastifySchemaCompiler } from "fastify";
import { SerializerSelector, type SerializerCompiler, type SerializerFactory } from "@fastify/fast-json-stringify-compiler";
import { Ajv, type AnySchema, type ErrorObject, type Options as AjvOptions, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { ApiError } from "../domain/errors.ts";
import { CANONICAL_UUID } from "../domain/names.ts";
import { PROTOTYPE_MEMBERS, findJsonFault, type JsonFault } from "../domain/storable-json.ts";

/**
 * The one validation layer every route shares. JSON bodies are parsed here and held to the
 * storage rules (no U+0000, no lone surrogate, finite numbers, bounded depth) before any schema
 * sees them; path and query parameters get the same string rules in their validators; and ids
 * declared `format: "uuid"` must be canonical. A fault is a 422 naming the field.
 */

type JsonParser = (request: FastifyRequest, body: string, done: (error: Error | null, value?: unknown) => void) => void;

/**
 * A body's text, or undefined when its bytes are not UTF-8. Decoding would replace each bad
 * sequence with U+FFFD, so two different bodies would read the same (two idempotency keys, two
 * store keys, one row): parsers read bodies as bytes and refuse these instead.
 */
export function utf8Text(body: unknown): string | undefined {
  if (typeof body === "string") return body;
  return Buffer.isBuffer(body) && isUtf8(body) ? body.toString("utf8") : undefined;
}

/**
 * Fastify's JSON parser given the body's bytes: a body that is not UTF-8 is a 400. No bytes at
 * all is no body, whatever the Content-Type says: many JSON clients send that header on every
 * request, and a cancel or redrive sent so must not be refused. A route that needs a body then
 * refuses it exactly as it refuses a request without one.
 */
export function utf8JsonParser(
  parse: JsonParser,
): (request: FastifyRequest, body: Buffer, done: (error: Error | null, value?: unknown) => void) => void {
  return (request, body, done) => {
    if (body.length === 0) return done(null, undefined);
    const text = utf8Text(body);
    if (text === undefined) return done(new ApiError("invalid_request", "the body is not valid UTF-8: send JSON text encoded as UTF-8"));
    parse(request, text, done);
  };
}

/**
 * Wraps Fastify's JSON parser (which keeps its prototype-poisoning checks and its 400 for
 * malformed JSON): a parsed body that breaks a storage rule is a 422 with the JSON Pointer of the
 * first fault.
 */
export function storableJsonParser(parse: JsonParser): JsonParser {
  return (request, body, done) =>
    parse(request, body, (error, value) => {
      if (error) return done(isValidJson(body) ? poisoningError() : error);
      const fault = findJsonFault(value);
      if (fault) return done(faultError("body", fault));
      done(null, value);
    });
}

/** Whether the text is JSON: when Fastify's parser refused JSON, it refused a prototype-poisoning member. */
function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Fastify's parser refuses these members (they could reach an object's prototype); its own message says the JSON is invalid. */
function poisoningError(): ApiError {
  return new ApiError("invalid_request", `the body has ${PROTOTYPE_MEMBERS}: these are refused (rename the key)`);
}

/** A storage-rule fault as the 422 a schema violation gives, with the same `errors` shape. */
export function faultError(location: string, fault: JsonFault): ApiError {
  const path = fault.path || "/";
  // A fault 128 levels down has a pointer of 128 segments: the detail shows its start.
  const shown = fault.path.length > 120 ? `${fault.path.slice(0, 120)}…` : fault.path;
  return new ApiError("validation_error", `${location}${shown} ${fault.problem}`, {
    fields: { errors: [{ location, path, message: fault.problem }] },
  });
}

/**
 * Bodies are validated exactly as sent: no type coercion, no silent removal of unknown fields
 * (schemas say `additionalProperties: false`, so an unknown field is a 422). Query strings and
 * path parameters arrive as text, so they are coerced to the schema's types, after their strings
 * pass the storage rules (bodies passed them in the parser).
 */
export function buildStrictValidator(externalSchemas: unknown): FastifySchemaCompiler<AnySchema> {
  const compilers = compilersFor(Object.values(externalSchemas as Record<string, AnySchema>));
  return ({ schema, httpPart }) => {
    const key = `${httpPart}\u0000${JSON.stringify(schema)}`;
    let validate = compilers.compiled.get(key);
    if (!validate) {
      validate = compileFor(compilers, schema, httpPart);
      compilers.compiled.set(key, validate);
    }
    return validate;
  };
}

interface Compilers {
  readonly bodyAjv: Ajv;
  readonly textAjv: Ajv;
  /** Validators by route part and schema text: routes and apps with the same schema share one. */
  readonly compiled: Map<string, ValidateFunction>;
}

/**
 * Compilers by the shared schemas they know, for the life of the process. Compiling validators
 * is most of what building an app costs (seconds of CPU for the whole API); a process that builds
 * the same app again (tests, benches, a restart in place) compiles each schema once.
 */
const compilersByExternalSchemas = new Map<string, Compilers>();

function compilersFor(externalSchemas: readonly AnySchema[]): Compilers {
  const key = JSON.stringify(externalSchemas);
  let compilers = compilersByExternalSchemas.get(key);
  if (!compilers) {
    const base: AjvOptions = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false, discriminator: true };
    const bodyAjv = withCanonicalUuids(new Ajv({ ...base, coerceTypes: false }));
    const textAjv = withCanonicalUuids(new Ajv({ ...base, coerceTypes: "array" }));
    for (const schema of externalSchemas) {
      bodyAjv.addSchema(schema);
      textAjv.addSchema(schema);
    }
    compilers = { bodyAjv, textAjv, compiled: new Map() };
    compilersByExternalSchemas.set(key, compilers);
  }
  return compilers;
}

function compileFor({ bodyAjv, textAjv }: Compilers, schema: AnySchema, httpPart: string | undefined): ValidateFunction {
  if (httpPart === "body") return bodyAjv.compile(schema);
  const validate = textAjv.compile(schema);
  const headers = httpPart === "headers";
  return guardText(validate, numericFields(schema, headers), !headers);
}

function withCanonicalUuids(ajv: Ajv): Ajv {
  addFormats.default(ajv);
  // ajv-formats' uuid also admits "urn:uuid:" and upper case, which the database then refuses or
  // stores under another spelling; the API speaks one spelling, the one it writes.
  ajv.addFormat("uuid", CANONICAL_UUID);
  return ajv;
}

/** Decimal text, as a number field of a query, path or header must be written: no hex, exponent, sign or spaces. */
const DECIMAL_INTEGER = /^-?[0-9]+$/;
const DECIMAL_NUMBER = /^-?[0-9]+(\.[0-9]+)?$/;

/**
 * The top-level fields of a (query, path or header) schema typed integer or number, by the name
 * the data carries them under: Node lower-cases header names; query and path names keep theirs.
 */
function numericFields(schema: unknown, headers: boolean): ReadonlyMap<string, RegExp> {
  const fields = new Map<string, RegExp>();
  const properties = typeof schema === "object" && schema !== null ? (schema as { properties?: unknown }).properties : undefined;
  if (typeof properties !== "object" || properties === null) return fields;
  for (const [name, property] of Object.entries(properties)) {
    const type = typeof property === "object" && property !== null ? (property as { type?: unknown }).type : undefined;
    const pattern = type === "integer" ? DECIMAL_INTEGER : type === "number" ? DECIMAL_NUMBER : undefined;
    if (pattern) fields.set(headers ? name.toLowerCase() : name, pattern);
  }
  return fields;
}

/**
 * A validator of text (a query, path parameters or headers) that first holds the text to the
 * rules Ajv's coercion would not: every string of a query or path to the storage rules
 * (`storable`), and a number field to plain decimal digits, since coercion reads `0x3`, `1e2` and
 * `+3` as numbers too.
 */
function guardText(validate: ValidateFunction, numeric: ReadonlyMap<string, RegExp>, storable: boolean): ValidateFunction {
  const guarded = ((data: unknown, context?: Parameters<ValidateFunction>[1]) => {
    const error = (storable ? storableError(data) : undefined) ?? numberTextError(data, numeric);
    if (error) {
      guarded.errors = [error];
      return false;
    }
    const valid = validate(data, context);
    guarded.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  // Fastify hands Ajv validators (known by their schemaEnv) the parent object, for root coercion.
  return Object.assign(guarded, { schemaEnv: validate.schemaEnv, schema: validate.schema });
}

function storableError(data: unknown): ErrorObject | undefined {
  const fault = findJsonFault(data);
  return fault && { instancePath: fault.path, schemaPath: "#", keyword: "storable", params: {}, message: fault.problem };
}

function numberTextError(data: unknown, numeric: ReadonlyMap<string, RegExp>): ErrorObject | undefined {
  if (numeric.size === 0 || typeof data !== "object" || data === null) return undefined;
  for (const [name, pattern] of numeric) {
    const value = (data as Record<string, unknown>)[name];
    if (typeof value === "string" && !pattern.test(value)) {
      const what = pattern === DECIMAL_INTEGER ? "an integer" : "a number";
      return {
        instancePath: `/${name}`,
        schemaPath: `#/properties/${name}/type`,
        keyword: "type",
        params: {},
        message: `must be ${what} in decimal digits`,
      };
    }
  }
  return undefined;
}

type Serializer = ReturnType<SerializerCompiler>;

/** Response serializers by the shared schemas and options they were built with, for the life of the process (as validators above). */
const serializersByExternalSchemas = new Map<string, Map<string, Serializer>>();

/** Fastify's own serializer factory (fast-json-stringify), compiling each distinct response schema once per process. */
export const buildCachedSerializer: SerializerFactory = (externalSchemas, options) => {
  const compile = SerializerSelector()(externalSchemas, options);
  const setKey = JSON.stringify([externalSchemas, options]);
  let serializers = serializersByExternalSchemas.get(setKey);
  if (!serializers) serializersByExternalSchemas.set(setKey, (serializers = new Map()));
  const cache = serializers;
  return (route) => {
    const key = JSON.stringify(route.schema);
    let serialize = cache.get(key);
    if (!serialize) {
      serialize = compile(route);
      cache.set(key, serialize);
    }
    return serialize;
  };
};
