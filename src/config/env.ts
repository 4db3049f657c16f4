/** Reading configuration from the environment: every value checked, every mistake named by its variable. */
export class ConfigError extends Error {}

export function envInt(env: NodeJS.ProcessEnv, name: string, fallback: number, range: { min?: number; max?: number } = {}): number {
  const text = env[name];
  if (text === undefined || text.trim() === '') return fallback;
  const n = Number(text);
  const min = range.min ?? 0;
  const max = range.max ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got '${text}'`);
  return n;
}

export function envBool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const text = env[name]?.trim().toLowerCase();
  if (text === undefined || text === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(text)) return true;
  if (['0', 'false', 'no', 'off'].includes(text)) return false;
  throw new ConfigError(`${name} must be true or false, got '${env[name]}'`);
}

export function envString(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const text = env[name];
  return text === undefined || text.trim() === '' ? fallback : text.trim();
}

export function envPositiveNumber(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (text === undefined || text === '') return fallback;
  const n = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`${name} must be a positive number, got '${env[name]}'`);
  return n;
}

export function envHost(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const text = envString(env, name, fallback);
  if (/[\s/]/.test(text)) throw new ConfigError(`${name} must be a host name or IP address, got '${env[name]}'`);
  return text;
}
