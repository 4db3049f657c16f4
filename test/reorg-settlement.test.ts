import t from 'tap';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { parseUnits, type Address } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { tester } from './helpers/devnet.ts';
import { gatewayOnOwnDevnet, until, x402Credential } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { reorgAbove } from './helpers/reorg.ts';

// A reorg would take back every other file's transactions on the shared devnet: this file runs chains of its own.
const { devnet, fixtures, gw } = await gatewayOnOwnDevnet(t, 'reorg', {
  GATE402_RECEIPT_POLL_MS: '50',
  GATE402_REORG_CHECK_MS: '100',
  GATE402_REORG_DEPTH_BLOCKS: '32',
});

const url = `${gw.url}/m/catjoke/joke?params%5Btopic%5D=naps&lang=en`;
const caip2 = CAIP2.base;
const n = devnet.manifest.networks[caip2] as NetworkEntry;
const price = 10_000n;

async function metric(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.split(',').every((kv) => l.includes(kv)));
  return line ? Number(line.split(' ').at(-1)) : Number.NaN;
}

t.test('a reorg drops three mined settlements: the gateway sends the same transactions again; each payment is paid once, and nothing is served twice', async (t) => {
  const offer = decodePaymentRequiredHeader(String((await fetch(url)).headers.get('payment-required'))).accepts.find((a) => a.network === caip2);
  const merchant = offer?.payTo as Address;
  const payers = [];
  for (let i = 0; i < 3; i++) payers.push(await fundedPayer(n, caip2, tester('gateway'), parseUnits('1', 6)));
  const merchantBefore = await stableBalance(n, merchant);
  const callsBefore = fixtures.calls;
  const blockBefore = BigInt(await rpcCall<string>(n.rpcUrl, 'eth_blockNumber', []));

  for (const payer of payers) {
    const res = await fetch(url, { headers: { 'payment-signature': await x402Credential(url, payer, caip2) } });
    t.equal(res.status, 200, `paid and served: ${await res.text()}`);
  }
  t.equal(await stableBalance(n, merchant), merchantBefore + 3n * price, 'three settlements mined');
  t.equal(fixtures.calls, callsBefore + 3, 'three upstream calls');

  // Everything since the payers were funded is taken back: three blocks, one settlement each.
  const reorg = await reorgAbove(n.rpcUrl, blockBefore);
  t.equal(reorg.top - blockBefore, 3n, 'one block per settlement');
  t.ok(reorg.replaced, 'the reorg replaced all three');

  await until(async () => (await stableBalance(n, merchant)) === merchantBefore + 3n * price, 'the settlements mined again', 60_000);
  for (const payer of payers) t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - price, 'each payer paid once');
  t.equal(fixtures.calls, callsBefore + 3, 'and the upstream was not called again');
  // Counted once the re-sent transaction's watch is written again, which may come after its block is mined.
  const resent = () => metric('gate402_reorged_transactions_total', `network="${caip2}",outcome="resent"`);
  await until(async () => (await resent()) >= 3, 'the gateway to count what it sent again', 30_000);
  t.equal(await resent(), 3, 'the metric counts three transactions sent again');

  // The relayers' next nonces follow the re-sent ones: a new payment settles at once.
  const next = await fundedPayer(n, caip2, tester('gateway'), parseUnits('1', 6));
  const res = await fetch(url, { headers: { 'payment-signature': await x402Credential(url, next, caip2) } });
  t.equal(res.status, 200, 'a payment after the reorg is served');
  t.equal(await stableBalance(n, merchant), merchantBefore + 4n * price, 'and paid');
  // The re-mined payments stay settled: presenting a used credential again is no second charge.
  t.equal(await metric('gate402_reorged_transactions_total', `network="${caip2}",outcome="lost"`), 0, 'nothing lost');
});
