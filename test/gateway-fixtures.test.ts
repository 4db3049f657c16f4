/**
 * The offline fixture upstreams: every catalog route answers a typical request with a deterministic JSON body
 * of its kind, echoes what it received, and reports whether the secret header reached it.
 */
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CatalogRouteRecord } from '../src/devnet/catalog/catalog.ts';
import { startFixtureUpstreams, type FixtureUpstreams } from '../src/devnet/fixtures/server.ts';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const SHARED = `${REPO}../shared/reference/routes.json`;
const reference: CatalogRouteRecord[] = existsSync(SHARED)
  ? (JSON.parse(readFileSync(SHARED, 'utf8')) as { routes: CatalogRouteRecord[] }).routes
  : (JSON.parse(readFileSync(`${REPO}src/devnet/catalog/routes.json`, 'utf8')) as CatalogRouteRecord[]);

interface Typical {
  rest?: string;
  query?: string;
  body?: string;
}

const HASH = `0x${'ab'.repeat(32)}`;
/** A typical request per route and method (`{operationId} {METHOD}`). */
const TYPICAL: Record<string, Typical> = {
  'chain-stocks-quote GET': { query: 'symbol=TSLA' },
  'chain-stocks-quote POST': { body: '{"symbol":"NVDA"}' },
  'chain-stocks-report GET': { query: 'params%5Bsection%5D=summary' },
  'chain-stocks-report POST': { body: '{"window": "7d"}' },
  'chain-stocks-stocks GET': {},
  'chain-stocks-stocks POST': { body: '{}' },
  'chain-stocks-token GET': { query: 'symbol=AAPL' },
  'chain-stocks-token POST': { body: '{"symbol":"AAPL"}' },
  'catjoke-joke GET': { query: 'params%5Btopic%5D=naps&lang=en' },
  'llm-chat-chat POST': {
    body: '{"model":"llm-fast","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is 2+2?"}]}',
  },
  'weather-air-quality GET': { query: 'latitude=48.85&longitude=2.35&current=european_aqi,pm10' },
  'weather-forecast GET': {
    query: 'latitude=-33.87&longitude=151.21&current=temperature_2m&hourly=temperature_2m,precipitation&daily=temperature_2m_max,temperature_2m_min,sunrise&forecast_days=3',
  },
  'weather-geocode GET': { query: 'name=Berlin&count=3' },
  'fx-currencies GET': {},
  'fx-historical GET': { rest: '2024-03-01..2024-03-08', query: 'base=USD&symbols=EUR' },
  'fx-latest GET': { query: 'base=USD&symbols=EUR,GBP' },
  'crypto-prices-chart GET': { rest: 'coingecko:ethereum', query: 'period=1d&span=5' },
  'crypto-prices-current GET': { rest: 'coingecko:bitcoin,ethereum:0xdac17f958d2ee523a2206206994597c13d831ec7' },
  'crypto-prices-historical GET': { rest: '1704067200/coingecko:bitcoin' },
  'defi-chains GET': {},
  'defi-protocols GET': {},
  'defi-stablecoins GET': { query: 'includePrices=true' },
  'defi-tvl GET': { rest: 'uniswap' },
  'wiki-search GET': { query: 'q=solar%20eclipse&limit=3' },
  'wiki-summary GET': { rest: 'Alan_Turing' },
  'words-define GET': { rest: 'serendipity' },
  'words-related GET': { query: 'rel_rhy=grape&max=5' },
  'news-search-front-page GET': {},
  'news-search-search GET': { query: 'query=webassembly&tags=story&hitsPerPage=5&numericFilters=points%3E100' },
  'world-data-country GET': { rest: 'DE', query: 'format=json&per_page=10' },
  'world-data-indicator GET': { rest: 'BR/indicator/SP.POP.TOTL', query: 'format=json&date=2015:2020' },
  'chain-explorer-address GET': { rest: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045/transactions' },
  'chain-explorer-stats GET': {},
  'chain-explorer-token GET': { rest: '0xdAC17F958D2ee523a2206206994597C13D831ec7/holders' },
  'chain-explorer-tx GET': { rest: `${HASH}/logs` },
  'books-search GET': { query: 'q=the+lord+of+the+rings&author=tolkien&limit=3' },
  'books-work GET': { rest: 'OL45804W.json' },
  'filings-facts GET': { rest: '0000320193.json' },
  'filings-filings GET': { rest: '0000320193.json' },
  'filings-tickers GET': {},
  'treasury-debt GET': { query: 'sort=-record_date&page%5Bsize%5D=3&filter=record_date:gte:2025-01-01' },
  'treasury-exchange-rates GET': { query: 'sort=-record_date&page%5Bsize%5D=5&filter=country_currency_desc:eq:Canada-Dollar' },
  'treasury-interest-rates GET': { query: 'sort=-record_date&page%5Bsize%5D=6' },
  'crypto-markets-coin GET': { rest: 'bitcoin' },
};

const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

function pathOf(r: CatalogRouteRecord, rest?: string): string {
  return `/${r.slug}/${r.route}${rest ? `/${rest}` : ''}`;
}

async function call(r: CatalogRouteRecord, method: string, typical: Typical, headers: Record<string, string> = {}, from: FixtureUpstreams = fixtures): Promise<Answer> {
  const url = `${from.baseUrlFor(r.slug)}/${r.route}${typical.rest ? `/${typical.rest}` : ''}${typical.query ? `?${typical.query}` : ''}`;
  const res = await fetch(url, {
    method,
    headers: { ...(typical.body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(typical.body !== undefined ? { body: typical.body } : {}),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function find(operationId: string): CatalogRouteRecord {
  return reference.find((r) => r.operationId === operationId)!;
}

t.test('base URLs', async (t) => {
  t.equal(fixtures.baseUrlFor('weather'), `http://127.0.0.1:${fixtures.port}/weather`);
});

t.test('the typical requests cover every catalog route and method', async (t) => {
  t.same(Object.keys(TYPICAL).sort(), reference.flatMap((r) => r.methods.map((m) => `${r.operationId} ${m}`)).sort());
});

t.test('every catalog route answers 200 with JSON, deterministic, with the request echoed', async (t) => {
  for (const r of reference) {
    for (const method of r.methods) {
      const typical = TYPICAL[`${r.operationId} ${method}`]!;
      const label = `${method} ${pathOf(r, typical.rest)}`;
      const before = fixtures.calls;
      const a = await call(r, method, typical, { 'x-api-key': 'k' });
      t.equal(fixtures.calls - before, 1, `${label}: counted`);
      t.equal(a.status, 200, `${label}: ${a.text.slice(0, 200)}`);
      t.match(a.headers.get('content-type'), /^application\/json/);
      t.equal(a.headers.get('server'), 'fixture-upstream/1.0');
      t.equal(a.headers.get('x-powered-by'), 'fixtures');
      t.equal(a.headers.get('x-upstream-secret-seen'), 'yes');
      const value = JSON.parse(a.text) as unknown;
      if (r.operationId === 'defi-tvl') {
        t.match(a.text, /^\d+\.\d{2}$/, `${label}: a bare number`);
        t.equal(typeof value, 'number');
      } else {
        t.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${label}: a JSON object`);
        const echo = (value as { _request: unknown })._request;
        t.same(echo, { method, path: pathOf(r, typical.rest), query: typical.query ?? '', ...(method === 'POST' ? { body: typical.body ?? '' } : {}) }, `${label}: request echoed`);
        t.ok(Object.keys(value as object).length > 1, `${label}: a body besides the echo`);
      }
      const again = await call(r, method, typical, { 'x-api-key': 'other', 'user-agent': 'another-client' });
      t.equal(again.text, a.text, `${label}: same bytes for the same request`);
      const anonymous = await call(r, method, typical);
      t.equal(anonymous.headers.get('x-upstream-secret-seen'), 'no', `${label}: no secret header seen`);
      t.equal(anonymous.text, a.text, `${label}: the body does not depend on headers`);
    }
  }
});

async function body(operationId: string, method: string, typical: Typical): Promise<Record<string, unknown>> {
  const a = await call(find(operationId), method, typical);
  if (a.status !== 200) throw new Error(`${operationId}: ${a.status} ${a.text}`);
  return JSON.parse(a.text) as Record<string, unknown>;
}

t.test('bodies honour their input', async (t) => {
  const f = (await body('weather-forecast', 'GET', TYPICAL['weather-forecast GET']!)) as {
    latitude: number;
    longitude: number;
    daily: Record<string, unknown[]>;
    hourly: Record<string, unknown[]>;
    current: Record<string, unknown>;
  };
  t.same([f.latitude, f.longitude], [-33.87, 151.21]);
  t.same(Object.keys(f.daily), ['time', 'temperature_2m_max', 'temperature_2m_min', 'sunrise']);
  t.ok(
    Object.values(f.daily).every((v) => v.length === 3),
    '3 forecast days',
  );
  t.same(Object.keys(f.hourly), ['time', 'temperature_2m', 'precipitation']);
  t.ok(
    Object.values(f.hourly).every((v) => v.length === 72),
    '72 hours',
  );
  t.ok(typeof f.current.temperature_2m === 'number');
  const other = await body('weather-forecast', 'GET', { query: 'latitude=10&longitude=20&daily=temperature_2m_max' });
  t.same([other.latitude, other.longitude, Object.keys(other.daily as object)], [10, 20, ['time', 'temperature_2m_max']]);
  t.equal(other.hourly, undefined, 'only what was asked for');
  t.equal((await call(find('weather-forecast'), 'GET', { query: 'latitude=91' })).status, 400, 'latitude out of range');

  const fx = (await body('fx-latest', 'GET', TYPICAL['fx-latest GET']!)) as { base: string; rates: Record<string, number> };
  t.equal(fx.base, 'USD');
  t.same(Object.keys(fx.rates), ['EUR', 'GBP']);
  const hist = (await body('fx-historical', 'GET', TYPICAL['fx-historical GET']!)) as { rates: Record<string, Record<string, number>> };
  t.same(Object.keys(hist.rates), ['2024-03-01', '2024-03-04', '2024-03-05', '2024-03-06', '2024-03-07', '2024-03-08'], 'business days of the range');
  t.equal((await body('fx-historical', 'GET', { rest: '2024-03-02' })).date, '2024-03-01', 'a weekend date gives the Friday before');
  t.equal((await call(find('fx-historical'), 'GET', { rest: '2024-13-45' })).status, 400);

  const chat = (await body('llm-chat-chat', 'POST', TYPICAL['llm-chat-chat POST']!)) as { model: string; choices: { message: { content: string } }[] };
  t.equal(chat.model, 'llm-fast', 'the model is echoed');
  t.match(chat.choices[0]!.message.content, /What is 2\+2\?/, 'the last user message is echoed');
  t.equal((await call(find('llm-chat-chat'), 'POST', { body: '{"model":' })).status, 400, 'malformed JSON');

  const wiki = await body('wiki-summary', 'GET', { rest: 'Ada%20Lovelace' });
  t.same([wiki.title, (wiki.titles as { canonical: string }).canonical], ['Ada Lovelace', 'Ada_Lovelace']);
  const coins = (await body('crypto-prices-current', 'GET', TYPICAL['crypto-prices-current GET']!)) as { coins: Record<string, { price: number }> };
  t.same(Object.keys(coins.coins), ['coingecko:bitcoin', 'ethereum:0xdac17f958d2ee523a2206206994597c13d831ec7']);
  const past = (await body('crypto-prices-historical', 'GET', TYPICAL['crypto-prices-historical GET']!)) as { coins: Record<string, { timestamp: number }> };
  t.equal(past.coins['coingecko:bitcoin']!.timestamp, 1704067200);
  const chart = (await body('crypto-prices-chart', 'GET', TYPICAL['crypto-prices-chart GET']!)) as { coins: Record<string, { prices: unknown[] }> };
  t.equal(chart.coins['coingecko:ethereum']!.prices.length, 5);

  const tvlA = await call(find('defi-tvl'), 'GET', { rest: 'aave' });
  const tvlB = await call(find('defi-tvl'), 'GET', { rest: 'curve' });
  t.not(tvlA.text, tvlB.text, 'per protocol');
  const stable = (await body('defi-stablecoins', 'GET', { query: 'includePrices=false' })) as { peggedAssets: Record<string, unknown>[] };
  t.ok(stable.peggedAssets.every((a) => !('price' in a)));
  const protocols = (await body('defi-protocols', 'GET', {})) as { protocols: unknown[] };
  t.ok(protocols.protocols.length >= 200, 'a large response');

  const debt = (await body('treasury-debt', 'GET', TYPICAL['treasury-debt GET']!)) as { data: { record_date: string }[]; meta: Record<string, unknown> };
  t.equal(debt.data.length, 3);
  t.ok(debt.data[0]!.record_date > debt.data[1]!.record_date, 'sorted descending');
  const rates = (await body('treasury-exchange-rates', 'GET', TYPICAL['treasury-exchange-rates GET']!)) as { data: { country_currency_desc: string }[] };
  t.ok(rates.data.length > 0 && rates.data.every((d) => d.country_currency_desc === 'Canada-Dollar'), 'filtered');

  const quote = await body('chain-stocks-quote', 'POST', TYPICAL['chain-stocks-quote POST']!);
  t.equal(quote.symbol, 'NVDA');
  t.equal((await call(find('chain-stocks-quote'), 'GET', { query: 'symbol=NOPE' })).status, 404, 'unknown stock');
  const byAddress = await body('chain-stocks-quote', 'GET', { query: `address=${quote.address as string}` });
  t.equal(byAddress.symbol, 'NVDA', 'by token address');

  const country = (await body('world-data-country', 'GET', TYPICAL['world-data-country GET']!)) as { countries: { id: string }[] };
  t.same(
    country.countries.map((c) => c.id),
    ['DEU'],
  );
  const indicator = (await body('world-data-indicator', 'GET', TYPICAL['world-data-indicator GET']!)) as { data: { date: string }[]; indicator: { id: string } };
  t.same([indicator.indicator.id, indicator.data.map((d) => d.date)], ['SP.POP.TOTL', ['2020', '2019', '2018', '2017', '2016', '2015']]);
  const news = (await body('news-search-search', 'GET', TYPICAL['news-search-search GET']!)) as { hits: { points: number }[] };
  t.ok(news.hits.length === 5 && news.hits.every((h) => h.points > 100), 'hitsPerPage and numericFilters');
  const books = (await body('books-search', 'GET', TYPICAL['books-search GET']!)) as { docs: unknown[] };
  t.equal(books.docs.length, 3);
  const facts = await body('filings-facts', 'GET', TYPICAL['filings-facts GET']!);
  t.equal(facts.cik, 320193);
  const tx = await body('chain-explorer-tx', 'GET', { rest: HASH });
  t.equal(tx.hash, HASH);
});

t.test('forwarding details: raw paths, queries and bodies are echoed as received', async (t) => {
  const r = find('chain-stocks-report');
  const raw = '{ "a" : [1, 2.50, "é"] ,"b":null }';
  const a = await call(r, 'POST', { query: 'x=%2F%20y&x=2&empty=', body: raw });
  t.equal(a.status, 200);
  t.same((JSON.parse(a.text) as { _request: unknown })._request, { method: 'POST', path: '/chain-stocks/report', query: 'x=%2F%20y&x=2&empty=', body: raw });
  const enc = await call(find('wiki-summary'), 'GET', { rest: 'Caf%C3%A9_M%C3%BCller' });
  t.same((JSON.parse(enc.text) as { title: string; _request: { path: string } })._request.path, '/wiki/summary/Caf%C3%A9_M%C3%BCller', 'the raw path');
  t.equal((JSON.parse(enc.text) as { title: string }).title, 'Café Müller', 'decoded for the body');
  const bin = await fetch(`${fixtures.baseUrlFor('chain-stocks')}/report`, { method: 'POST', body: new Uint8Array([0xff, 0x00, 0x7f]) });
  t.equal(bin.status, 400, 'a non-JSON body to a JSON route');
});

t.test('test hooks and routing errors', async (t) => {
  const r = find('catjoke-joke');
  const faulty = await startFixtureUpstreams({ host: '127.0.0.1', port: 0, faults: true });
  t.teardown(() => faulty.close());
  const failing = await call(r, 'GET', { query: 'fixture_status=503' }, {}, faulty);
  t.equal(failing.status, 503);
  t.match(JSON.parse(failing.text), { error: 'fixture failure', _request: { query: 'fixture_status=503' } });
  const started = Date.now();
  t.equal((await call(r, 'GET', { query: 'fixture_delay_ms=150' }, {}, faulty)).status, 200);
  t.ok(Date.now() - started >= 140, 'answered late');
  // Without `faults` (as the CLI starts them), nobody can make a fixture fail or stall.
  t.equal((await call(r, 'GET', { query: 'fixture_status=503' })).status, 200, 'fixture_status is ignored by default');
  const prompt = Date.now();
  // The longest delay there is: ignored, the answer comes long before it, however loaded the machine.
  t.equal((await call(r, 'GET', { query: 'fixture_delay_ms=30000' })).status, 200);
  t.ok(Date.now() - prompt < 20_000, `fixture_delay_ms is ignored by default (${Date.now() - prompt} ms)`);
  t.equal((await fetch(`${fixtures.baseUrlFor('catjoke')}/nope`)).status, 404);
  t.equal((await fetch(`${fixtures.baseUrlFor('nobody')}/joke`)).status, 404);
  t.equal((await fetch(`${fixtures.baseUrlFor('catjoke')}/joke`, { method: 'POST', body: '{}' })).status, 405);
  t.equal((await fetch(`${fixtures.baseUrlFor('wiki')}/summary/%E0%A4%A`)).status, 400, 'bad percent-encoding');
});

t.test('a second instance answers the same bodies', async (t) => {
  const other = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  t.teardown(() => other.close());
  for (const id of ['weather-forecast', 'defi-protocols', 'treasury-debt', 'chain-explorer-address']) {
    const r = find(id);
    const typical = TYPICAL[`${id} GET`]!;
    const url = `/${r.route}${typical.rest ? `/${typical.rest}` : ''}${typical.query ? `?${typical.query}` : ''}`;
    const [a, b] = await Promise.all([fetch(`${fixtures.baseUrlFor(r.slug)}${url}`), fetch(`${other.baseUrlFor(r.slug)}${url}`)]);
    t.equal(await a.text(), await b.text(), id);
  }
  t.equal(other.calls, 4);
});
