/**
 * Cheap requests must not do expensive work. Fifty big merchants (100 routes each, their text at the per-merchant
 * bound) are registered on a real gateway by ten wallets from ten addresses; then the gateway process's CPU (user +
 * system, /proc/<pid>/stat) per request of `/health` and of every discovery document is compared with its CPU per
 * unpaid 402, over hundreds of requests each, interleaved in rounds so that a loaded machine weighs on all alike.
 * Each document, once built, costs at most a few 402s; an ETag revalidation is a 304; the per-wallet and
 * per-merchant bounds refuse with a clear 4xx.
 */
import t from 'tap';
import { Agent, get as httpGet } from 'node:http';
import { processCpuSeconds } from '../../bench/cpu.ts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import type { Registration } from '../../src/gateway/merchants/types.ts';
import { DEFAULT_MERCHANT_SIZE_LIMITS } from '../../src/gateway/merchants/validate.ts';
import { freshAccount, network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';

const MERCHANTS = 50;
const WALLETS = 10;
const ROUTES = 100;
/** Requests per endpoint per round, and rounds: 200 requests of each, the 402 included. */
const PER_ROUND = 100;
const ROUNDS = 2;
/** "A few times an unpaid 402". */
const MAX_RATIO = 5;

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: await gassedKey(n),
    GATE402_CATALOG_UPSTREAM_BASE: 'http://127.0.0.1:9',
    // Each wallet registers from its own address (as an attacker with many addresses would), past the per-IP limit.
    GATE402_TRUST_PROXY: '1',
    GATE402_MERCHANT_MAX_PER_WALLET: String(MERCHANTS / WALLETS),
    GATE402_LOG_LEVEL: 'warn',
  },
});
t.teardown(() => gw.stop());
const pid = gw.child.pid as number;

// Text that compresses as prose does, not as one repeated letter.
let seed = 42;
const rand = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const WORDS = Array.from({ length: 400 }, () => Array.from({ length: 3 + Math.floor(rand() * 7) }, () => String.fromCharCode(97 + Math.floor(rand() * 26))).join(''));
const prose = (bytes: number) => {
  let s = '';
  while (s.length < bytes) s += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return s.slice(0, bytes).trim();
};

let nonces = 0;
function bigMerchant(payTo: `0x${string}`, slug: string, routes = ROUTES, perRoute = 600): Registration {
  return {
    action: 'register',
    slug,
    name: `Big merchant ${slug}`,
    description: prose(500),
    payTo,
    networks: [CAIP2.stockChain],
    upstream: { kind: 'file', fileName: 'answer.txt', contentType: 'text/plain', contentBase64: 'aGk=' },
    routes: Array.from({ length: routes }, (_, i) => ({
      route: `route-number-${i}`,
      methods: ['GET', 'POST'] as ['GET', 'POST'],
      priceUsd: '0.010000',
      summary: prose(100),
      description: prose(perRoute - 200),
      input: prose(80),
    })),
    nonce: `big-${++nonces}-${Math.random().toString(36).slice(2)}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
}

async function register(account: ReturnType<typeof freshAccount>, registration: Registration, ip: string): Promise<{ status: number; body: { error?: string } }> {
  const signature = await account.signTypedData(registrationTypedData(registration));
  const res = await fetch(`${gw.url}/api/merchants`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
    body: JSON.stringify({ registration, signature }),
  });
  return { status: res.status, body: (await res.json()) as { error?: string } };
}

const wallets = Array.from({ length: WALLETS }, () => freshAccount());
const slugs: string[] = [];

t.before(async () => {
  for (let i = 0; i < MERCHANTS; i++) {
    const w = i % WALLETS;
    const slug = `big-${i}-${wallets[w]!.address.slice(2, 8).toLowerCase()}`;
    const r = await register(wallets[w]!, bigMerchant(wallets[w]!.address, slug), `10.0.0.${w + 1}`);
    if (r.status !== 201) throw new Error(`registering ${slug}: ${r.status} ${JSON.stringify(r.body)}`);
    slugs.push(slug);
  }
});

t.test('the bounds refuse with a clear 4xx', async (t) => {
  const full = await register(wallets[0]!, bigMerchant(wallets[0]!.address, 'one-too-many', 2), '10.0.1.1');
  t.equal(full.status, 403, 'a wallet past its quota of merchants');
  t.match(full.body.error, /already holds 5 merchants, the most one wallet may register \(5\)/);
  const fresh = freshAccount();
  const tooLong = await register(fresh, bigMerchant(fresh.address, 'too-much-text', ROUTES, 700), '10.0.1.2');
  t.equal(tooLong.status, 400, 'a merchant over the text bound');
  t.match(tooLong.body.error, new RegExp(`over the ${DEFAULT_MERCHANT_SIZE_LIMITS.maxTextBytes} allowed`));
  const tooMany = await register(fresh, bigMerchant(fresh.address, 'too-many-routes', 101, 100), '10.0.1.3');
  t.equal(tooMany.status, 400, 'a merchant over the route bound');
  t.match(tooMany.body.error, /at most 100 routes/);
  const health = (await (await fetch(`${gw.url}/health`)).json()) as { merchants: number };
  t.ok(health.merchants >= MERCHANTS, `/health counts ${health.merchants} merchants, the refused ones not among them`);
});

t.test('every document costs at most a few unpaid 402s; a revalidation is a 304', async (t) => {
  const slug = slugs[7] as string;
  const headers = { 'accept-encoding': 'br, gzip' };
  const endpoints: Record<string, { path: string; status: number }> = {
    'unpaid 402': { path: `/m/${slug}/route-number-3`, status: 402 },
    '/health': { path: '/health', status: 200 },
    '/openapi.json': { path: '/openapi.json', status: 200 },
    '/m/{slug}/openapi.json': { path: `/m/${slug}/openapi.json`, status: 200 },
    '/.well-known/x402': { path: '/.well-known/x402', status: 200 },
    '/api/merchants': { path: '/api/merchants', status: 200 },
    '/llms.txt': { path: '/llms.txt', status: 200 },
  };
  // Built once (the first request after the registrations), and each a 304 on its ETag.
  for (const [name, e] of Object.entries(endpoints)) {
    const res = await fetch(`${gw.url}${e.path}`, { headers });
    await res.arrayBuffer();
    t.equal(res.status, e.status, `${name} answers ${e.status}`);
    if (name === 'unpaid 402' || name === '/health') continue;
    const etag = res.headers.get('etag');
    t.ok(etag, `${name} has an ETag`);
    t.equal(res.headers.get('content-encoding'), 'br', `${name} is compressed`);
    const again = await fetch(`${gw.url}${e.path}`, { headers: { ...headers, 'if-none-match': etag as string } });
    t.equal(again.status, 304, `${name}: If-None-Match with its ETag is a 304`);
  }
  const index = await fetch(`${gw.url}/openapi.json`);
  t.ok((await index.text()).includes(slugs[MERCHANTS - 1] as string), 'the index holds every merchant');

  const cpu: Record<string, number> = Object.fromEntries(Object.keys(endpoints).map((k) => [k, 0]));
  // A connection the server closes while undici reuses it (a 402 answered without reading a body closes it) is asked again.
  const dropped: Record<string, number> = Object.fromEntries(Object.keys(endpoints).map((k) => [k, 0]));
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  t.teardown(() => agent.destroy());
  const ask = async (name: string, e: { path: string; status: number }) => {
    for (let attempt = 1; ; attempt++) {
      try {
        // node:http, which leaves the body compressed: the client's own work is not what is measured.
        const status = await new Promise<number>((resolve, reject) => {
          const req = httpGet(`${gw.url}${e.path}`, { headers, agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
            res.on('error', reject);
          });
          req.on('error', reject);
        });
        if (status !== e.status) throw new Error(`${name} answered ${status}`);
        return;
      } catch (err) {
        if (attempt >= 3 || /answered/.test((err as Error).message)) throw err;
        dropped[name] = (dropped[name] as number) + 1;
      }
    }
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, e] of Object.entries(endpoints)) {
      const before = processCpuSeconds(pid) as number;
      // Four connections at a time, as a crawler or a flood would ask.
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < PER_ROUND / 4; i++) await ask(name, e);
        }),
      );
      cpu[name] = (cpu[name] as number) + ((processCpuSeconds(pid) as number) - before);
    }
  }
  t.comment(`connections dropped and asked again: ${JSON.stringify(dropped)}`);
  const requests = Math.floor(PER_ROUND / 4) * 4 * ROUNDS;
  const perRequest = Object.fromEntries(Object.entries(cpu).map(([k, s]) => [k, (s * 1000) / requests]));
  const base = perRequest['unpaid 402'] as number;
  t.comment(
    `gateway CPU per request over ${requests} requests each (ms): ${Object.entries(perRequest)
      .map(([k, ms]) => `${k} ${ms.toFixed(3)} (x${(ms / base).toFixed(2)})`)
      .join(', ')}`,
  );
  t.ok(base > 0, 'the 402s were measured (more than one clock tick)');
  for (const [name, ms] of Object.entries(perRequest)) {
    if (name === 'unpaid 402') continue;
    t.ok(ms <= MAX_RATIO * base, `${name}: ${ms.toFixed(3)} ms per request, at most ${MAX_RATIO}x an unpaid 402's ${base.toFixed(3)} ms`);
  }
});
