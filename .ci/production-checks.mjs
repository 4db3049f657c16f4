// The answers of a production install's facilitator and gateway, checked for what they say (not just 200).
// Reads FAC, GW, RELAYER_ADDRESS, RECEIPT_SIGNER and NETWORKS_FILE from the environment and exits non-zero at the first
// answer that is not so. Run by .ci/production-install.sh.
import { readFileSync } from 'node:fs';

const env = process.env;
const networks = Object.keys(JSON.parse(readFileSync(env.NETWORKS_FILE, 'utf8')).networks).sort();

async function get(url) {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

function check(ok, what) {
  if (!ok) throw new Error(`not so: ${what}`);
  console.log(`production-install: ok - ${what}`);
}

const supported = await get(`${env.FAC}/supported`);
const exactKinds = supported.kinds.filter((k) => k.scheme === 'exact');
check(
  JSON.stringify(exactKinds.map((k) => k.network).sort()) === JSON.stringify(networks) && supported.kinds.every((k) => k.x402Version === 2),
  `facilitator /supported lists x402 v2 exact on exactly the networks of the file: ${networks.join(', ')}`,
);
// Payment-channel deposits are listed only where the batch-settlement contracts stand (this devnet has them), and on
// no network outside the file.
check(
  supported.kinds.every((k) => k.scheme === 'exact' || (k.scheme === 'batch-settlement' && networks.includes(k.network))),
  'every other kind /supported lists is a batch-settlement deposit on a network of the file',
);
check(supported.signers?.['eip155:*']?.includes(env.RELAYER_ADDRESS), `facilitator /supported names the operator relayer ${env.RELAYER_ADDRESS} as its signer`);
check((await get(`${env.FAC}/health`)).ok === true, 'facilitator /health is ok');

const openapi = await get(`${env.GW}/openapi.json`);
check(openapi.openapi === '3.1.0' && openapi.info?.title === 'gate402 marketplace', 'gateway /openapi.json is the marketplace OpenAPI 3.1 document');
check(JSON.stringify(openapi).includes(env.GW), `gateway /openapi.json names its public URL ${env.GW}`);
const health = await get(`${env.GW}/health`);
check(health.ok === true && health.merchants === 0, 'gateway /health is ok, and no demo catalog is seeded off the devnet');
const wellKnown = await get(`${env.GW}/.well-known/gate402`);
check(wellKnown.receiptSigner?.toLowerCase() === env.RECEIPT_SIGNER.toLowerCase(), `gateway receipts are signed by the operator key (${env.RECEIPT_SIGNER})`);
const list = await get(`${env.GW}/api/stock/list`);
check(list.stocks?.length > 0, `the stock desk lists the ${list.stocks?.length} stocks of the networks file`);
const symbol = list.stocks[0].symbol;
const quote = await get(`${env.GW}/api/stock/quote?symbol=${symbol}&stable_amount=10`);
check(BigInt(quote.estimatedSharesAtomic ?? 0) > 0n, `QuoterV2, called through the desk's own ABI, prices 10 of stablecoin B at ${quote.estimatedShares} ${symbol}`);
