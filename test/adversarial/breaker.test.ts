/**
 * Circuit-breaker griefing. After a failed upstream call a buyer may send the same credential again without paying
 * again; a buyer whose input makes the upstream fail must not be able to replay that one payment until the
 * merchant's breaker opens for everybody. And a half-open breaker's single trial must be given back however the
 * trial request ends (client gone, body too large), or the merchant stays refused forever.
 */
import t from 'tap';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { parseUnits, type LocalAccount } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import type { PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from '../helpers/payments.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';

const n = network(testDevnet(), CAIP2.stockChain);
const funder = tester('attackMemory');
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0, faults: true });
t.teardown(() => fixtures.close());
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: await gassedKey(n),
    GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('llm-chat')).origin,
    GATE402_BREAKER_THRESHOLD: '2',
    GATE402_BREAKER_OPEN_MS: '1500',
  },
});
t.teardown(() => gw.stop());

const chat = `${gw.url}/m/llm-chat/chat`;
const failing = `${chat}?fixture_status=500`;
const question = JSON.stringify({ model: 'llm-fast', messages: [{ role: 'user', content: 'Is the breaker open?' }] });
const post = (at: string, headers: Record<string, string> = {}, body: string = question) =>
  fetch(at, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, duplex: 'half' } as RequestInit);
const status = async (res: Promise<Response>) => {
  const r = await res;
  await r.arrayBuffer();
  return r.status;
};

/** Pays with the official client; returns the answer and the credential it sent. */
async function buy(payer: LocalAccount, at: string): Promise<{ status: number; credential: string }> {
  let credential = '';
  const recording: typeof fetch = async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    credential ||= req.headers.get('payment-signature') ?? '';
    return fetch(req);
  };
  const client = registerExactEvmScheme(
    x402Client.fromConfig({
      schemes: [],
      spendControls: false,
      paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === CAIP2.stockChain) ?? (offers[0] as (typeof offers)[number]),
    }),
    { signer: payer },
  );
  const res = await wrapFetchWithPayment(recording, client)(at, { method: 'POST', headers: { 'content-type': 'application/json' }, body: question });
  await res.arrayBuffer();
  return { status: res.status, credential };
}

/** A credential for the chat route made from its 402 offer, as a buyer holding the offer can send at any time. */
async function credentialFor(payer: LocalAccount): Promise<string> {
  const res = await post(chat);
  const required = decodePaymentRequiredHeader(res.headers.get('payment-required') as string);
  await res.arrayBuffer();
  const offer = required.accepts.find((a) => a.network === CAIP2.stockChain) as PaymentRequirements;
  return encodePaymentSignatureHeader({ ...(await officialPayment(payer, offer)), resource: required.resource } as never);
}

async function untilHalfOpen(): Promise<void> {
  while ((await status(post(chat))) === 503) await new Promise((r) => setTimeout(r, 200));
}

t.test('replaying one failed credential, even 20 times at once, leaves the breaker closed for other buyers', async (t) => {
  const attacker = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const first = await buy(attacker, failing);
  t.equal(first.status, 502, 'the upstream fails on this input after payment');
  const calls = fixtures.calls;
  const sequential: number[] = [];
  for (let i = 0; i < 5; i++) sequential.push(await status(post(failing, { 'payment-signature': first.credential })));
  t.same(sequential, [502, 502, 502, 502, 502], 'each replay is a retry that fails again');
  const concurrent = await Promise.all(Array.from({ length: 20 }, () => status(post(failing, { 'payment-signature': first.credential }))));
  t.ok(
    concurrent.every((s) => s === 502 || s === 402),
    `concurrent replays: ${JSON.stringify(concurrent)}`,
  );
  t.ok(fixtures.calls - calls >= 5, 'the replays reached the upstream');
  t.equal(await stableBalance(n, attacker.address), 950_000n, 'the attacker paid once');
  t.equal(await status(post(chat)), 402, 'the breaker is closed: others are offered to pay');
  const honest = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  t.equal((await buy(honest, chat)).status, 200, 'and another buyer is served');
});

t.test('a half-open trial whose client goes away, or whose body is too large, is given back', async (t) => {
  const b1 = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const b2 = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const b3 = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const credential = await credentialFor(b3); // its offer is read while the breaker is closed
  t.equal((await buy(b1, failing)).status, 502);
  t.equal((await buy(b2, failing)).status, 502);
  t.equal(await status(post(chat)), 503, 'two buyers failing open the breaker');

  await untilHalfOpen();
  // The trial's client sends the start of a body and goes away.
  const abort = new AbortController();
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode('{"model":"llm-fast",'));
    },
  });
  const gone = fetch(chat, { method: 'POST', headers: { 'content-type': 'application/json', 'payment-signature': credential }, body, duplex: 'half', signal: abort.signal } as RequestInit).catch(
    () => undefined,
  );
  await new Promise((r) => setTimeout(r, 300));
  abort.abort();
  await gone;
  // The gateway learns of the close when its loop gets to it (later on a loaded machine): asked for up to 5 s, well
  // short of the 15 s upstream timeout that would free a trial anyway.
  let after = await status(post(chat));
  for (const until = Date.now() + 5000; after === 503 && Date.now() < until; ) {
    await new Promise((r) => setTimeout(r, 100));
    after = await status(post(chat));
  }
  t.equal(after, 402, 'after the client went away the trial is free again (not 503 forever)');

  // The trial's body is larger than any limit, sent chunked so that it is only found out while reading.
  const chunk = new Uint8Array(1 << 20).fill(0x20);
  let sent = 0;
  const huge = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent++ < 40) c.enqueue(chunk);
      else c.close();
    },
  });
  const tooLarge = await fetch(chat, { method: 'POST', headers: { 'content-type': 'application/json', 'payment-signature': credential }, body: huge, duplex: 'half' } as RequestInit).then(
    async (r) => {
      await r.arrayBuffer();
      return r.status;
    },
    () => 'closed',
  );
  t.ok(tooLarge === 413 || tooLarge === 'closed', `a body too large is refused (${tooLarge})`);
  t.equal(await status(post(chat)), 402, 'after a 413 the trial is free again');
  t.equal(await stableBalance(n, b3.address), 1_000_000n, 'neither charged the buyer');

  // The buyer's proper trial succeeds and closes the breaker.
  t.equal(await status(post(chat, { 'payment-signature': credential })), 200, 'the trial is served');
  t.equal(await stableBalance(n, b3.address), 950_000n, 'and paid once');
  t.equal(await status(post(failing)), 402, 'the breaker is closed');
});
