// One channel claimer per cluster: two `gate402 gateway` nodes over one embedded PostgreSQL, on chains of this file's
// own (it pauses mining). The first node holds the claim lease and claims what both nodes accepted; the other stands
// by and still takes vouchers. The claimer node is SIGKILLed after its claim's broadcast and before its record says
// mined (the chain even losing the transaction): the survivor takes the claim lease over and carries the same signed
// claim to its receipt from the record, then sweeps. Every voucher is claimed exactly once (totalClaimed on chain =
// the charges = the merchant's balance change), no claim is sent twice, the upstream was called once per voucher.
import t from 'tap';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { Address, Hex } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { CLAIM_LEASE } from '../src/channels/claim-lease.ts';
import { readManifest } from '../src/devnet/manifest.ts';
import { countingUpstream } from './helpers/channel-buyer.ts';
import { channelOf, newChannelPayer, payChannel, settlementEvents, type ChannelPayer } from './helpers/channel-payers.ts';
import { channelOnChain } from './helpers/channels.ts';
import { network } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway, until, type PaidGateway } from './helpers/paid-gateway.ts';
import { stableBalance } from './helpers/payments.ts';
import { startPostgres } from './helpers/postgres.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';

const PRICE = 10_000n; // catjoke/joke: 0.01 USD
/** A claim is due once the accepted-but-unclaimed value reaches 30 prices. */
const THRESHOLD = 30n * PRICE;

const devnet = await spawnOwnDevnet('cluster-claims');
t.teardown(() => devnet.stop());
const manifest = readManifest(devnet.manifestPath);
const n = network(manifest, CAIP2.base);
const upstream = await countingUpstream();
t.teardown(() => upstream.close());
const db = await startPostgres();
t.teardown(() => db.stop());
const sql = new pg.Client({ connectionString: db.url });
await sql.connect();
t.teardown(() => sql.end());

const node = async (id: string): Promise<PaidGateway> => {
  const started = await spawnPaidGateway(
    manifest,
    upstream.origin,
    {
      GATE402_STORE_URL: db.url,
      GATE402_NODE_ID: id,
      // Two takers of each lease: a term wide enough that a loaded machine never lets one lapse by itself.
      GATE402_LEASE_MS: '4000',
      GATE402_STORE_CONNECT_TIMEOUT_MS: '30000',
      GATE402_STOCK_ENABLED: 'false',
      GATE402_CHANNEL_CLAIM_INTERVAL_MS: '250',
      GATE402_CHANNEL_CLAIM_EXPOSURE: String(THRESHOLD),
      GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: '900',
      GATE402_LOG_LEVEL: 'info',
    },
    { manifestPath: devnet.manifestPath },
  );
  t.teardown(() => started.gw.stop('SIGKILL'));
  return started;
};
// The first to start takes the claim lease; the second stands by.
const a = await node('k1');
const b = await node('k2');

/** The node holding the claim lease now, by the database's clock. */
async function claimer(): Promise<string | undefined> {
  const rows = await sql.query<{ node: string }>('SELECT node FROM gate402_leases WHERE name = $1 AND expires_at > clock_timestamp()', [CLAIM_LEASE]);
  return rows.rows[0]?.node;
}

/** The unfinished claim records in the shared store. */
async function openClaims(): Promise<Array<{ state: string; txs: Array<{ hash: Hex }> }>> {
  const rows = await sql.query<{ value: { state: string; txs: Array<{ hash: Hex }> } }>("SELECT value FROM records WHERE collection = 'channel-claims' AND key LIKE 'open/%'");
  return rows.rows.map((r) => r.value);
}

const merchant = decodePaymentRequiredHeader((await fetch(`${a.gw.url}/m/catjoke/joke`)).headers.get('payment-required') as string).accepts.find(
  (o) => o.scheme === 'batch-settlement' && o.network === CAIP2.base,
)?.payTo as Address;

interface Payer extends ChannelPayer {
  at: PaidGateway;
}

const newPayer = async (at: PaidGateway): Promise<Payer> => ({ ...(await newChannelPayer(n, 20)), at });
const pay = (p: Payer, times: number) => payChannel(p, `${p.at.gw.url}/m/catjoke/joke`, times, PRICE);
const channelIdOf = (p: Payer) => channelOf(p).channelId;
const claimsOf = async (channelId: Hex) => (await settlementEvents(n, 'Claimed')).filter((l) => 'channelId' in l.args && l.args.channelId.toLowerCase() === channelId.toLowerCase());

t.test('the first node holds the claim lease; the standby node still takes vouchers', async (t) => {
  t.equal(await claimer(), 'k1', 'the claim lease is the first node’s');
  t.match(readFileSync(b.gw.logPath, 'utf8'), /channel claimer standing by/, 'the second node says it stands by');
});

t.test('the claimer node SIGKILLed after its claim is broadcast: the survivor carries the same claim, every voucher claimed once', async (t) => {
  const payers = [await newPayer(a), await newPayer(b)];
  const calls = upstream.calls;
  // 29 prices, at both nodes: below the threshold, nothing is claimed yet.
  await pay(payers[0] as Payer, 15);
  await pay(payers[1] as Payer, 14);
  const merchantBefore = await stableBalance(n, merchant);
  const [aTxs, bTxs] = [await relayerTxCount(n, a.relayers), await relayerTxCount(n, b.relayers)];
  t.equal((await channelOnChain(n, channelIdOf(payers[1] as Payer))).totalClaimed, 0n, 'nothing claimed below the threshold');

  // Mining stops: the claim the thirtieth price makes due (paid at the standby node) stays at the chain's door.
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(n.rpcUrl, 'evm_setAutomine', [true]));
  await pay(payers[1] as Payer, 1);
  await until(async () => (await relayerTxCount(n, a.relayers)) > aTxs, 'the claimer node to broadcast its claim', 120_000);
  const written = await openClaims();
  t.equal(written.length, 1, 'one claim record is open');
  t.equal(written[0]?.state, 'sending', 'its record written ahead of the broadcast, not mined');
  const pending = (await rpcCall<{ pending: Record<string, Record<string, { hash: Hex }>> }>(n.rpcUrl, 'txpool_content', [])).pending;
  const claimTx = Object.values(pending).flatMap((byNonce) => Object.values(byNonce).map((tx) => tx.hash))[0] as Hex;
  t.equal(claimTx, written[0]?.txs.at(-1)?.hash, 'the transaction at the chain is the one its record holds');
  await a.gw.stop('SIGKILL');
  // The chain loses it too: only the claim's record can bring it back.
  await rpcCall(n.rpcUrl, 'anvil_dropTransaction', [claimTx]);
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);

  await until(async () => (await claimer()) === 'k2', 'the survivor to take the claim lease', 60_000);
  const charges = 30n * PRICE;
  await until(async () => (await stableBalance(n, merchant)) - merchantBefore === charges, 'the sweep by the survivor', 120_000);
  let claimed = 0n;
  for (const p of payers) {
    const channelId = channelIdOf(p);
    const claims = await claimsOf(channelId);
    t.equal(claims.length, 1, `the channel of ${p.paid} payments was claimed once`);
    t.equal(claims[0]?.transactionHash, claimTx, 'by the transaction the dead claimer signed');
    const onChain = (await channelOnChain(n, channelId)).totalClaimed;
    t.equal(onChain, BigInt(p.paid) * PRICE, 'up to its charges');
    claimed += onChain;
  }
  t.equal(claimed, charges, 'totalClaimed on chain is the sum of the charges at both nodes');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, charges, "the merchant's wallet received exactly that");
  t.equal((await relayerTxCount(n, a.relayers)) - aTxs, 1, 'the dead node sent one transaction: the claim');
  t.equal((await relayerTxCount(n, b.relayers)) - bTxs, 1, 'the survivor sent one: the sweep (the claim re-sent as it was signed)');
  t.equal(upstream.calls - calls, 30, 'the upstream was called once per accepted voucher');
  t.match(readFileSync(b.gw.logPath, 'utf8'), /resuming a channel claim/, 'the survivor resumed the claim from its record');
  await until(async () => (await openClaims()).length === 0, 'no claim left open');
  t.pass('no claim left open');

  // The survivor claims on: vouchers accepted now are claimed by it.
  const next = await newPayer(b);
  const before = await stableBalance(n, merchant);
  await pay(next, 30);
  await until(async () => (await stableBalance(n, merchant)) - before === 30n * PRICE, 'the next claim and sweep', 120_000);
  t.equal((await channelOnChain(n, channelIdOf(next))).totalClaimed, 30n * PRICE, 'the next channel claimed by the new claimer node');
});
