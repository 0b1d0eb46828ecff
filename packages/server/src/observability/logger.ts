import { pino, type DestinationStream, type Logger } from "pino";
import pretty from "pino-pretty";

export type LogFormat = "json" | "pretty";
export const LOG_FORMATS: readonly LogFormat[] = ["json", "pretty"];

/**
 * Where a secret could sit in a log object: credentials in request headers (Fastify's request
 * serializer logs no headers, but an `err` or a `req` logged by hand might carry them), and fields
 * named for a secret anywhere one level down. Their values are replaced, never printed.
 */
const REDACTED_PATHS = [
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  "req.headers.cookie",
  "headers.authorization",
  'headers["x-api-key"]',
  "authorization",
  "token",
  "secret",
  "password",
  "apiKey",
  "*.authorization",
  "*.token",
  "*.secret",
  "*.password",
  "*.apiKey",
  "*.jwtSecret",
];

export interface LoggerOptions {
  readonly level: string;
  readonly format: LogFormat;
  /** Where lines go (default: stdout). Tests capture them with a stream. */
  readonly destination?: DestinationStream;
}

/**
 * The process's one logger: pino JSON lines (`time` as epoch milliseconds, `level` as a name), or
 * pino-pretty's readable lines for `rudder dev`. Every component logs through children of it.
 */
export function createLogger(options: LoggerOptions): Logger {
  const settings = {
    level: options.level,
    formatters: { level: (label: string) => ({ level: label }) },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
  };
  if (options.format === "pretty") {
    return pino(
      settings,
      pretty({
        colorize: !options.destination && process.stdout.isTTY,
        translateTime: "HH:MM:ss.l",
        singleLine: true,
        ignore: "pid,hostname",
        destination: options.destination ?? 1,
        sync: true,
      }),
    );
  }
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
