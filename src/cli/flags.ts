/** The options every long-running command takes, and how a bad one is reported (exit 2). */
export interface CommonFlags {
  fresh?: boolean;
  manifest?: string;
  ports?: string;
  host?: string;
  'block-time'?: string;
  'exit-after'?: string;
}

export class UsageError extends Error {}

export function positiveNumber(text: string, what: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${what} must be a non-negative number, got '${text}'`);
  return n;
}
