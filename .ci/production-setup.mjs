// What an operator writes, for .ci/production-install.sh: a networks file (here, a devnet's chains with their stock
// listing) and fresh keys of its own, given gas with anvil_setBalance. Prints shell assignments for the script.
// Usage: node .ci/production-setup.mjs <devnet manifest> <networks file to write>
import { readFileSync, writeFileSync } from 'node:fs';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

const [manifestPath, networksPath] = process.argv.slice(2);
const { networks } = JSON.parse(readFileSync(manifestPath, 'utf8'));
writeFileSync(networksPath, `${JSON.stringify({ networks }, null, 2)}\n`);

// Each part settles with relayers of its own (two processes on one key would race each other for nonces).
const keys = { FACILITATOR_RELAYER_KEY: generatePrivateKey(), GATEWAY_RELAYER_KEY: generatePrivateKey(), GATEWAY_KEY: generatePrivateKey(), DESK_KEY: generatePrivateKey() };
// Relayers pay settlement gas on every chain, the desk swaps and sponsors on the stock chain: 100 ETH each.
for (const name of ['FACILITATOR_RELAYER_KEY', 'GATEWAY_RELAYER_KEY', 'DESK_KEY']) {
  for (const n of Object.values(networks)) {
    const res = await fetch(n.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_setBalance', params: [privateKeyToAccount(keys[name]).address, '0x56bc75e2d63100000'] }),
    });
    const answer = await res.json();
    if (answer.error) throw new Error(`anvil_setBalance on ${n.rpcUrl}: ${answer.error.message}`);
  }
}
for (const [name, key] of Object.entries(keys)) console.log(`${name}=${key}`);
console.log(`RELAYER_ADDRESS=${privateKeyToAccount(keys.FACILITATOR_RELAYER_KEY).address}`);
console.log(`RECEIPT_SIGNER=${privateKeyToAccount(keys.GATEWAY_KEY).address}`);
