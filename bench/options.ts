/**
 * The options every bench script takes, and the three sizes of a run:
 * - `full` (the default): the figures of record;
 * - `quick` (`--quick`): every scenario briefly, a smoke check of the whole bench in a few minutes;
 * - `tiny` (`--tiny`): the smallest loads that still run every code path, for test/bench-quick.test.ts.
 *
 * A script declares its own options with a default per size; `--profile`, `--manifest` (a running devnet the bench
 * may drive, else the script starts its own) and `--out` (where its figures go as JSON) are common. Unknown options
 * are ignored: `npm run bench -- <scenario> --seconds 5` hands the same options to every script of a scenario.
 */
import { parseArgs } from 'node:util';

export const PROFILES = ['full', 'quick', 'tiny'] as const;
export type Profile = (typeof PROFILES)[number];

export interface BenchOptions<K extends string> {
  profile: Profile;
  manifest: string | undefined;
  out: string | undefined;
  /** A whole number (or, with `fraction`, any number) of at least `min` (default 1). */
  number(name: K, opts?: { min?: number; fraction?: boolean }): number;
  /** A comma-separated list of such numbers. */
  numbers(name: K, opts?: { min?: number; fraction?: boolean }): number[];
  /** The option as given, for the record. */
  text(name: K): string;
}

export function benchOptions<K extends string>(defaults: Record<Profile, Record<K, string>>, args: string[] = process.argv.slice(2)): BenchOptions<K> {
  const own = Object.keys(defaults.full) as K[];
  const { values } = parseArgs({
    args,
    options: {
      profile: { type: 'string' },
      quick: { type: 'boolean' },
      tiny: { type: 'boolean' },
      manifest: { type: 'string' },
      out: { type: 'string' },
      ...Object.fromEntries(own.map((k) => [k, { type: 'string' as const }])),
    },
    strict: false,
    allowPositionals: true,
  });
  const named = values.profile;
  const profile: Profile = values.tiny === true ? 'tiny' : values.quick === true ? 'quick' : named === undefined ? 'full' : (named as Profile);
  if (!PROFILES.includes(profile)) throw new Error(`--profile takes ${PROFILES.join(', ')}, not ${String(named)}`);
  const text = (name: K): string => {
    const given = values[name];
    if (given === undefined) return defaults[profile][name];
    if (typeof given !== 'string') throw new Error(`--${name} needs a value`);
    return given;
  };
  const parse = (name: K, raw: string, opts: { min?: number; fraction?: boolean } = {}): number => {
    const n = Number(raw);
    const min = opts.min ?? 1;
    if (raw.trim() === '' || !Number.isFinite(n) || n < min || (!opts.fraction && !Number.isInteger(n))) {
      throw new Error(`--${name} takes ${opts.fraction ? 'numbers' : 'whole numbers'} from ${min}, not '${raw}'`);
    }
    return n;
  };
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  return {
    profile,
    manifest: str('manifest'),
    out: str('out'),
    number: (name, opts) => parse(name, text(name), opts),
    numbers: (name, opts) =>
      text(name)
        .split(',')
        .map((part) => parse(name, part, opts)),
    text,
  };
}
