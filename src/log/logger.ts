/**
 * The project's one logger: a JSON object per line on stderr. Callers pass ids (payment, order), never secrets:
 * keys named like secrets are dropped here as a second line of defence.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET_KEY = /(private.?key|secret|password|authorization|api.?key|mnemonic|signature)/i;

function clean(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET_KEY.test(k)) continue;
    out[k] = typeof v === 'bigint' ? v.toString() : v instanceof Error ? v.message : v;
  }
  return out;
}

export function createLogger(name: string, opts: { level?: LogLevel; write?: (line: string) => void; base?: LogFields } = {}): Logger {
  const level = opts.level ?? ((process.env.GATE402_LOG_LEVEL as LogLevel | undefined) ?? 'info');
  const write = opts.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const base = opts.base ?? {};
  const emit = (lvl: LogLevel, msg: string, fields: LogFields = {}): void => {
    if (ORDER[lvl] < (ORDER[level] ?? 20)) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: lvl, name, msg, ...clean(base), ...clean(fields) }));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(name, { level, write, base: { ...base, ...fields } }),
  };
}
