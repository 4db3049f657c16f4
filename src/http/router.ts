/**
 * Method + path dispatch for {@link ../server.ts}. Paths are matched on the raw (percent-encoded) request
 * path, without the query string.
 *
 * A route path is either exact (`/verify`) or a pattern of `/`-separated segments where `:name` matches one
 * non-empty segment (percent-decoded into `params.name`) and a final `*` matches the rest of the path,
 * possibly empty (kept raw in `params['*']`). Exact routes win; patterns are tried in registration order.
 * A `GET` route also answers `HEAD`.
 */

type Segment = { kind: 'literal'; value: string } | { kind: 'param'; name: string } | { kind: 'rest' };

interface Route<H> {
  path: string;
  segments: Segment[] | undefined; // undefined: exact path
  handlers: Map<string, H>;
}

export type RouteMatch<H> =
  | { kind: 'found'; handler: H; params: Record<string, string> /** The registered path, e.g. `/m/:slug/*`. */; route: string }
  | { kind: 'not_found' }
  | { kind: 'method_not_allowed'; allow: string[] }
  | { kind: 'bad_path' };

const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * A new, empty string record without inherited keys (`constructor`, `__proto__` are as absent as any other key),
 * like `Object.create(null)` but with V8's fast properties: an `Object.create(null)` object is a slow dictionary.
 * For path parameters here, and the server's request headers.
 */
export const StringRecord = function StringRecord() {} as unknown as new () => Record<string, string>;
StringRecord.prototype = Object.create(null) as Record<string, string>;

function parsePattern(path: string): Segment[] | undefined {
  if (!path.startsWith('/')) throw new Error(`route path must start with "/": ${JSON.stringify(path)}`);
  const parts = path.slice(1).split('/');
  if (!parts.some((p) => p.startsWith(':') || p === '*')) return undefined;
  return parts.map((p, i): Segment => {
    if (p === '*') {
      if (i !== parts.length - 1) throw new Error(`"*" must be the last segment of ${path}`);
      return { kind: 'rest' };
    }
    if (p.startsWith(':')) {
      const name = p.slice(1);
      if (name === '' || name === '*') throw new Error(`bad parameter name in ${path}`);
      return { kind: 'param', name };
    }
    return { kind: 'literal', value: p };
  });
}

/**
 * `undefined` when the path, given as its `/`-separated `parts`, does not match; throws URIError on bad
 * percent-encoding in a parameter.
 */
function matchSegments(segments: Segment[], parts: string[]): Record<string, string> | undefined {
  if (!fits(segments, parts)) return undefined;
  const params = new StringRecord();
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === 'rest') {
      params['*'] = parts.length === i + 1 ? parts[i]! : parts.slice(i).join('/');
      return params;
    }
    const part = parts[i];
    if (part === undefined) return undefined;
    if (seg.kind === 'literal') {
      if (part !== seg.value) return undefined;
    } else {
      if (part === '') return undefined;
      params[seg.name] = part.includes('%') ? decodeURIComponent(part) : part;
    }
  }
  return parts.length === segments.length ? params : undefined;
}

/**
 * Whether the path's shape fits the pattern (its literals, a part for each parameter, no part left over without a
 * `*`), checked without allocating: most patterns a request is tried against fail here.
 */
function fits(segments: Segment[], parts: string[]): boolean {
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === 'rest') return true;
    const part = parts[i];
    if (part === undefined || (seg.kind === 'literal' ? part !== seg.value : part === '')) return false;
  }
  return parts.length === segments.length;
}

function handlerFor<H>(route: Route<H>, method: string): H | undefined {
  return route.handlers.get(method) ?? (method === 'HEAD' ? route.handlers.get('GET') : undefined);
}

function allowedMethods<H>(routes: Route<H>[]): string[] {
  const set = new Set<string>();
  for (const r of routes) for (const m of r.handlers.keys()) set.add(m);
  if (set.has('GET')) set.add('HEAD');
  return [...set].sort();
}

export class Router<H> {
  private readonly exact = new Map<string, Route<H>>();
  private readonly patterns: Route<H>[] = [];

  add(method: string, path: string, handler: H): void {
    if (!METHOD_TOKEN.test(method)) throw new Error(`bad HTTP method ${JSON.stringify(method)}`);
    const segments = parsePattern(path);
    let route = segments === undefined ? this.exact.get(path) : this.patterns.find((r) => r.path === path);
    if (route === undefined) {
      route = { path, segments, handlers: new Map() };
      if (segments === undefined) this.exact.set(path, route);
      else this.patterns.push(route);
    }
    if (route.handlers.has(method)) throw new Error(`route ${method} ${path} is already registered`);
    route.handlers.set(method, handler);
  }

  match(method: string, path: string): RouteMatch<H> {
    // The first route matching the path that has a handler for the method wins. Routes that match the path
    // without one are kept (rarely any) for the 405's Allow.
    let matched: Route<H>[] | undefined;
    const exact = this.exact.get(path);
    if (exact !== undefined) {
      const handler = handlerFor(exact, method);
      if (handler !== undefined) return { kind: 'found', handler, params: new StringRecord(), route: exact.path };
      matched = [exact];
    }
    let badPath = false;
    if (this.patterns.length > 0) {
      const parts = path.slice(1).split('/');
      for (const route of this.patterns) {
        let params: Record<string, string> | undefined;
        try {
          params = matchSegments(route.segments!, parts);
        } catch {
          badPath = true;
        }
        if (params === undefined) continue;
        const handler = handlerFor(route, method);
        if (handler !== undefined) return { kind: 'found', handler, params, route: route.path };
        matched ??= [];
        matched.push(route);
      }
    }
    if (matched !== undefined) return { kind: 'method_not_allowed', allow: allowedMethods(matched) };
    return badPath ? { kind: 'bad_path' } : { kind: 'not_found' };
  }
}
