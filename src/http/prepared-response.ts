/**
 * A handler's response, checked and encoded for uWS: the status line, header names and values (nothing the server
 * writes itself: `content-length`, `transfer-encoding`, `connection`), the body. Frozen responses and frozen header
 * records are checked and encoded once (see {@link HttpResponse}).
 */
import { Buffer } from 'node:buffer';
import type { RecognizedString } from 'uWebSockets.js';
import { FilledHeader, HEADER_VALUE } from './header-template.ts';
import { json, statusLine, type HttpResponse } from './server.ts';

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const RESERVED_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection']);
const EMPTY = new Uint8Array(0);

export interface PreparedResponse {
  status: number;
  /** `statusLine(status)` */
  line: RecognizedString;
  headers: [RecognizedString, RecognizedString][];
  /** A string goes to uWS as it is (encoded there, straight into the socket's buffer: no Buffer made per response). */
  body: Uint8Array | string;
}

/**
 * Frozen responses, checked and encoded once (see {@link HttpResponse}), status line and headers included: uWS takes
 * bytes as they are, where it would encode a string on every write.
 */
const preparedFrozen = new WeakMap<HttpResponse, PreparedResponse>();
/** Frozen `headers` objects shared by responses that are not frozen themselves, checked and encoded once. */
const preparedFrozenHeaders = new WeakMap<Record<string, string>, [Buffer, Buffer][]>();

/**
 * Header names that passed the checks below: the few a handler writes are checked once, not per response. Bounded:
 * past it (names an upstream chose, say) a name is simply checked every time.
 */
const checkedNames = new Set<string>();
const CHECKED_NAMES_MAX = 512;

function checkName(name: string): void {
  if (checkedNames.has(name)) return;
  if (!HEADER_NAME.test(name)) throw new TypeError(`invalid response header name ${JSON.stringify(name)}`);
  if (RESERVED_HEADERS.has(name.toLowerCase())) throw new TypeError(`response header ${name} is set by the server`);
  if (checkedNames.size < CHECKED_NAMES_MAX) checkedNames.add(name);
}

function checkedHeaders(record: Record<string, string | FilledHeader> | undefined, out: [RecognizedString, RecognizedString][] = []): [RecognizedString, RecognizedString][] {
  if (record === undefined) return out;
  for (const name of Object.keys(record)) {
    const value = record[name];
    checkName(name);
    if (value instanceof FilledHeader) {
      out.push([name, value.value]);
      continue;
    }
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) throw new TypeError(`invalid value for response header ${name}`);
    out.push([name, value]);
  }
  return out;
}

const frozenOrAbsent = (o: object | undefined) => o === undefined || Object.isFrozen(o);
const utf8 = (text: RecognizedString) => (typeof text === 'string' ? Buffer.from(text, 'utf8') : (text as Buffer)); // as uWS encodes a string

export function prepare(r: HttpResponse): PreparedResponse {
  if (r === null || typeof r !== 'object') throw new TypeError('handler returned no response object');
  const frozen = Object.isFrozen(r) && frozenOrAbsent(r.headers) && frozenOrAbsent(r.moreHeaders);
  if (frozen) {
    const hit = preparedFrozen.get(r);
    if (hit !== undefined) return hit;
  }
  const { status } = r;
  if (!Number.isInteger(status) || status < 200 || status > 599) throw new TypeError(`invalid response status ${String(status)}`);
  let headers: [RecognizedString, RecognizedString][];
  if (!frozen && r.headers !== undefined && Object.isFrozen(r.headers)) {
    let shared = preparedFrozenHeaders.get(r.headers);
    if (shared === undefined) {
      shared = checkedHeaders(r.headers).map(([n, v]): [Buffer, Buffer] => [utf8(n), utf8(v)]);
      preparedFrozenHeaders.set(r.headers, shared);
    }
    headers = r.moreHeaders === undefined ? shared : checkedHeaders(r.moreHeaders, [...shared]);
  } else headers = checkedHeaders(r.moreHeaders, checkedHeaders(r.headers));
  const body = r.body === undefined ? EMPTY : r.body;
  if (!(body instanceof Uint8Array) && typeof body !== 'string') throw new TypeError('response body must be a string or a Uint8Array');
  if ((status === 204 || status === 304) && body.length > 0) throw new TypeError(`a ${status} response has no body`);
  if (!frozen) return { status, line: statusLine(status), headers, body };
  const prepared = { status, line: utf8(statusLine(status)), headers: headers.map(([n, v]): [Buffer, Buffer] => [utf8(n), utf8(v)]), body: typeof body === 'string' ? utf8(body) : body };
  preparedFrozen.set(r, prepared);
  return prepared;
}

export function errorBody(status: number, message: string, headers?: Record<string, string>): PreparedResponse {
  return prepare(json(status, { error: message }, headers));
}
