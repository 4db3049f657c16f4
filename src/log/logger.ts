/**
 * The project's one logger, on pino: a JSON object per line on stderr for machines (a file, a pipe, a log shipper),
 * pino-pretty's one line per entry, in colour, when stderr is a terminal. Callers pass ids (payment, order), never
 * secrets: keys named like secrets are dropped here as a second line of defence.
 */
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pino, stdTimeFunctions, type DestinationStream, type Logger as Pino } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  /** Default: GATE402_LOG_LEVEL, else info. */
  level?: LogLevel;
  /** Where each entry goes, one line (no newline) per call. Default: stderr. */
  write?: (line: string) => void;
  /** Human lines instead of JSON. Default: whether stderr is a terminal (and `write` is not given). */
  pretty?: boolean;
  base?: LogFields;
}

const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];
const SECRET_KEY = /(private.?key|secret|password|authorization|api.?key|mnemonic|signature)/i;

/** The fields as they may be logged: no key named like a secret; bigints and errors as text. */
export function cleanFields(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET_KEY.test(k)) continue;
    out[k] = typeof v === 'bigint' ? v.toString() : v instanceof Error ? v.message : v;
  }
  return out;
}

/** A level named in the environment, or info for none or an unknown one. */
export function levelFrom(value: string | undefined): LogLevel {
  return LEVELS.find((l) => l === value) ?? 'info';
}

export function createLogger(name: string, opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? levelFrom(process.env.GATE402_LOG_LEVEL);
  const pretty = opts.pretty ?? (opts.write === undefined && process.stderr.isTTY === true);
  const root = pino(
    {
      name,
      level,
      base: undefined,
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination(opts.write, pretty),
  );
  return wrap(opts.base && Object.keys(opts.base).length > 0 ? root.child(cleanFields(opts.base)) : root);
}

/**
 * A level below the logger's costs one comparison: no fields are cleaned for it. A child (one per payment, per
 * batch) is a pino child only once it writes a line, which at the default level most never do.
 */
function wrap(p: Pino): Logger {
  return wrapLazy(() => p, p);
}

function wrapLazy(make: () => Pino, levels: Pino): Logger {
  let made: Pino | undefined;
  const pinoOf = () => {
    made ??= make();
    return made;
  };
  const at =
    (level: LogLevel) =>
    (msg: string, fields?: LogFields): void => {
      if (levels.isLevelEnabled(level)) pinoOf()[level](cleanFields(fields ?? {}), msg);
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (fields) => {
      const bindings = cleanFields(fields);
      return wrapLazy(() => pinoOf().child(bindings), levels);
    },
  };
}

/**
 * Synchronous writes, as before: a line logged just before a crash (or a SIGKILL) is on disk. pino-pretty is loaded
 * only for a terminal, so a production process that logs to a pipe never loads it.
 */
function destination(write: ((line: string) => void) | undefined, pretty: boolean): DestinationStream {
  const out = write ?? ((line: string) => writeSync(2, `${line}\n`));
  if (!pretty) return write ? { write: (chunk) => eachLine(chunk, out) } : pino.destination({ fd: 2, sync: true });
  const require = createRequire(import.meta.url);
  const { prettyFactory } = require('pino-pretty') as typeof import('pino-pretty');
  const prettify = prettyFactory({
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'name,part',
    messageFormat: '{name}{if part}/{part}{end}: {msg}',
    colorize: write === undefined && process.stderr.isTTY === true,
    errorLikeObjectKeys: [],
  });
  return { write: (chunk) => eachLine(chunk, (line) => out(prettify(line).trimEnd())) };
}

function eachLine(chunk: string, out: (line: string) => void): void {
  for (const line of chunk.split('\n')) if (line) out(line);
}
