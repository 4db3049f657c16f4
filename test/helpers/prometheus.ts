/** A reader of the Prometheus text exposition format (version 0.0.4), strict enough to catch a malformed scrape. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** `# TYPE` of each metric family. */
  types: Map<string, string>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/;

function unescapeLabel(s: string): string {
  return s.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function number(text: string): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  // prom-client writes NaN as `Nan` (the event-loop lag mean between two scrapes closer than its resolution).
  if (text === 'NaN' || text === 'Nan') return Number.NaN;
  const n = Number(text);
  if (text === '' || Number.isNaN(n)) throw new Error(`not a sample value: ${JSON.stringify(text)}`);
  return n;
}

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (type) types.set(type[1] as string, type[2] as string);
      else if (!line.startsWith('# HELP ')) throw new Error(`line ${i + 1}: unknown comment ${line}`);
      continue;
    }
    const name = NAME.exec(line)?.[0];
    if (!name) throw new Error(`line ${i + 1}: no metric name: ${line}`);
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      while (!rest.startsWith('}')) {
        const m = LABEL.exec(rest);
        if (!m) throw new Error(`line ${i + 1}: bad label at ${rest}`);
        labels[m[1] as string] = unescapeLabel(m[2] as string);
        rest = rest.slice(m[0].length);
        if (rest.startsWith(',')) rest = rest.slice(1);
      }
      rest = rest.slice(1);
    }
    const [value, timestamp, ...extra] = rest.trim().split(/\s+/);
    if (!rest.startsWith(' ') || value === undefined || extra.length > 0 || (timestamp !== undefined && !/^-?\d+$/.test(timestamp))) throw new Error(`line ${i + 1}: bad sample ${line}`);
    samples.push({ name, labels, value: number(value) });
  }
  return { samples, types };
}

/** The sum of the samples named `name` whose labels include `labels`; undefined when there is none. */
// biome-ignore lint/suspicious/noShadowRestrictedNames: a module export, imported by name; Object.prototype.valueOf is not reached through it
export function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  let found: number | undefined;
  for (const s of exposition.samples) {
    if (s.name !== name || !Object.entries(labels).every(([k, v]) => s.labels[k] === v)) continue;
    found = (found ?? 0) + s.value;
  }
  return found;
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(url, { headers });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  if (!/^text\/plain; version=0\.0\.4/.test(res.headers.get('content-type') ?? '')) throw new Error(`${url}: content-type ${res.headers.get('content-type')}`);
  return parseExposition(await res.text());
}
