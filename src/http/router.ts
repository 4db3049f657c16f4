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
  | { kind: 'found'; handler: H; params: Record<string, string>; /** The registered path, e.g. `/m/:slug/*`. */ route: string }
  | { kind: 'not_found' }
  | { kind: 'method_not_allowed'; allow: string[] }
  | { kind: 'bad_path' };

const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

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

/** `undefined` when the path does not match; throws URIError on bad percent-encoding in a parameter. */
function matchSegments(segments: Segment[], path: string): Record<string, string> | undefined {
  const parts = path.slice(1).split('/');
  const params: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === 'rest') {
      params['*'] = parts.slice(i).join('/');
      return params;
    }
    const part = parts[i];
    if (part === undefined) return undefined;
    if (seg.kind === 'literal') {
      if (part !== seg.value) return undefined;
    } else {
      if (part === '') return undefined;
      params[seg.name] = decodeURIComponent(part);
    }
  }
  return parts.length === segments.length ? params : undefined;
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
    const candidates: { route: Route<H>; params: Record<string, string> }[] = [];
    const exact = this.exact.get(path);
    if (exact !== undefined) candidates.push({ route: exact, params: Object.create(null) as Record<string, string> });
    let badPath = false;
    for (const route of this.patterns) {
      try {
        const params = matchSegments(route.segments!, path);
        if (params !== undefined) candidates.push({ route, params });
      } catch {
        badPath = true;
      }
    }
    for (const { route, params } of candidates) {
      const handler = route.handlers.get(method) ?? (method === 'HEAD' ? route.handlers.get('GET') : undefined);
      if (handler !== undefined) return { kind: 'found', handler, params, route: route.path };
    }
    if (candidates.length > 0) return { kind: 'method_not_allowed', allow: allowedMethods(candidates.map((c) => c.route)) };
    return badPath ? { kind: 'bad_path' } : { kind: 'not_found' };
  }
}
