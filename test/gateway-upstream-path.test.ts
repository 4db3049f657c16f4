import t from 'tap';
import { ACTIVE_CONTENT_CSP, paidAnswerHeaders, rendersActiveContent, sendableHeaders } from '../src/gateway/paywall/paid-headers.ts';
import { checkQuery, confinedUpstreamUrl, confinePath, upstreamRelativePath } from '../src/gateway/paywall/upstream-path.ts';

/** What the upstream URL of `rest` (after `/m/{slug}/`) would be under `base`, or the refusal. */
function urlOf(base: string, rest: string, query = ''): string {
  const confined = confinePath(rest);
  if (!confined.ok) return `refused: ${confined.error.message}`;
  const built = confinedUpstreamUrl(base, upstreamRelativePath(confined.value.route, confined.value.segments), query);
  return built.ok ? built.value : `refused: ${built.error.message}`;
}

t.test('every spelling of a way out of the route is refused', async (t) => {
  const escapes = [
    'latest/..',
    'latest/.',
    'latest/%2e%2e',
    'latest/%2E%2e',
    'latest/.%2E',
    'latest/%2e.',
    'latest/%2e',
    '..',
    '%2e%2e',
    'latest/..%2f..%2fx',
    'latest/a%2Fb',
    'latest/a\\b',
    'latest/a%5cb',
    'latest/a%5Cb',
    'latest/a%00b',
    'latest/a%0Ab',
    'latest/a%0d%0ab',
    'latest/a%7Fb',
    'latest/a%C2%85b',
    'latest/%C0%AE%C0%AE',
    'latest/%E0%80%AE',
    'latest/%ZZ',
    'latest/%',
    'latest/%E0%A4',
    'latest/%ED%A0%80', // a surrogate, UTF-8 encoded
  ];
  for (const rest of escapes) t.match(urlOf('https://api.example/v1', rest), /^refused: /, rest);
});

t.test('allowed segments land inside the route, canonically encoded', async (t) => {
  t.equal(urlOf('https://api.example/v1/', 'latest'), 'https://api.example/v1/latest');
  t.equal(urlOf('https://api.example/v1', 'latest/'), 'https://api.example/v1/latest/');
  t.equal(urlOf('https://api.example/v1', 'historical/2024-01-01..2024-02-01', 'base=EUR'), 'https://api.example/v1/historical/2024-01-01..2024-02-01?base=EUR');
  t.equal(urlOf('https://api.example', 'x/a%20b/..;/%252e%252e/caf%c3%a9/.../(x)'), 'https://api.example/x/a%20b/..%3B/%252e%252e/caf%C3%A9/.../%28x%29');
  t.equal(urlOf('https://api.example', 'x/a b'), 'https://api.example/x/a%20b', 'a raw space is encoded');
  t.equal(urlOf('https://api.example/v1', 'x//y'), 'https://api.example/v1/x//y', 'an empty segment stays inside');
});

t.test('the built URL is checked once parsed', async (t) => {
  t.same(
    confinedUpstreamUrl('https://api.example/v1', 'latest/..', ''),
    { ok: false, error: { code: 'invalid_path', message: 'the path leaves the route', status: 400 } },
    'a dot segment that got through would be caught',
  );
  t.same(confinedUpstreamUrl('https://api.example/v1', 'latest/%2e%2e', ''), { ok: false, error: { code: 'invalid_path', message: 'the path leaves the route', status: 400 } });
  t.same(confinedUpstreamUrl('https://api.example/v1', 'latest/a\\b', ''), { ok: false, error: { code: 'invalid_path', message: 'the path leaves the route', status: 400 } });
  t.same(confinedUpstreamUrl('not a url', 'latest', ''), { ok: false, error: { code: 'invalid_path', message: 'the merchant upstream is misconfigured', status: 400 } });
});

t.test('queries: malformed escapes, invalid UTF-8, controls and # are refused', async (t) => {
  for (const q of ['a=%ZZ', 'a=%', 'a=%C3%28', 'a=%E0%A4', 'a=\u0001', 'a=b#c']) t.ok(checkQuery(q), q);
  for (const q of ['', 'a=1&b=2', 'params%5Btopic%5D=naps', 'a=caf%C3%A9', 'a=%2e%2e', 'q=a+b']) t.equal(checkQuery(q), undefined, q);
});

t.test('paid answer headers: private, no-store, Vary, nosniff; unsendable values dropped; active content sandboxed', async (t) => {
  const h = paidAnswerHeaders(
    { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'public, max-age=60', 'content-language': '\u20ac', etag: '"a\r\nSet-Cookie: x=1"' },
    { 'PAYMENT-RESPONSE': 'proof' },
  );
  t.equal(h['cache-control'], 'private, no-store');
  t.match(h.vary, /PAYMENT-SIGNATURE/);
  t.match(h.vary, /Authorization/);
  t.equal(h['x-content-type-options'], 'nosniff');
  t.equal(h['content-security-policy'], ACTIVE_CONTENT_CSP);
  t.equal(h['content-language'], undefined);
  t.equal(h.etag, undefined);
  t.equal(h['PAYMENT-RESPONSE'], 'proof');
  t.equal(paidAnswerHeaders({ 'content-type': 'application/json' }, {})['content-security-policy'], undefined);
  for (const ct of [undefined, '', 'text/html', 'application/xhtml+xml', 'image/svg+xml', 'text/xml', 'application/pdf']) t.ok(rendersActiveContent(ct), String(ct));
  for (const ct of ['application/json', 'text/plain', 'image/png', 'text/csv']) t.notOk(rendersActiveContent(ct), ct);
  t.same(sendableHeaders({ 'content-length': '5', 'bad name': 'x', ok: ' v ' }), { ok: 'v' });
});
