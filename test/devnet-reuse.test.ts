import t from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CAIP2, chainIdOf } from '../src/chain/canonical.ts';
import { writeManifest, type DevnetManifest } from '../src/devnet/manifest.ts';
import { startDevnet } from '../src/devnet/run.ts';
import { tempDir } from './helpers/temp-dir.ts';

// `gate402 start --manifest m.json` reuses the devnet m.json names. It used to give each chain one second to answer
// (eth_chainId, then the stablecoin's code); on a loaded machine a chain that answered later was taken for dead, and
// the start deployed chains of its own and wrote them into m.json: buyers the bench had funded on the running devnet
// were then refused on the new one ("402 rejected (permit2_insufficient_balance)" for every stock order). Here the
// chains are stand-ins that answer JSON-RPC after a delay, so the verdict depends on no load: the old probe always
// misses a 1.5 s answer, however fast the machine.

const STABLECOIN = '0x5fbdb2315678afecb367f032d93f642f64180aa3';

/** A stand-in chain: its chain id and some code at the stablecoin, each answered `delayMs` after it is asked (never when undefined). */
async function slowChain(chainId: number, delayMs: number | undefined): Promise<{ url: string; asked: () => number; close(): Promise<void> }> {
  let asked = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      asked++;
      if (delayMs === undefined) return; // never answers
      const { id, method } = JSON.parse(body) as { id: number; method: string };
      const result = method === 'eth_chainId' ? `0x${chainId.toString(16)}` : '0x6080';
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result })), delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked: () => asked,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A manifest of one chain at `rpcUrl`, owned by `pid`. */
function manifestOf(rpcUrl: string, pid: number): DevnetManifest {
  const stockChain = chainIdOf(CAIP2.stockChain);
  return {
    version: 1,
    createdAt: new Date().toISOString(),
    pid,
    networks: { [CAIP2.stockChain]: { chainId: stockChain, rpcUrl, stablecoin: { address: STABLECOIN, name: 'SC USD', version: '1', decimals: 6, symbol: 'SCUSD' } } },
    accounts: { relayers: [], buyers: [], merchants: [] },
  };
}

const dir = tempDir('devnet-reuse');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('a running devnet whose chains answer in 1.5 s is reused as it is, not replaced by new chains', async (t) => {
  const chain = await slowChain(chainIdOf(CAIP2.stockChain), 1500);
  t.teardown(() => chain.close());
  const path = join(dir, 'slow.json');
  // Owned by a process that runs: tap, which runs this file.
  writeManifest(path, manifestOf(chain.url, process.ppid));
  const before = readFileSync(path, 'utf8');
  const lines: string[] = [];
  // No ports: a start that would replace the devnet starts no anvil here, and writes a manifest without the chain.
  const devnet = await startDevnet({ manifestPath: path, host: '127.0.0.1', ports: {}, fresh: false, log: (l) => lines.push(l) }).catch((err: Error) => err);
  if (devnet instanceof Error) throw devnet;
  t.equal(devnet.owned, false, 'the running devnet is used, not one of its own');
  t.equal(devnet.manifest.networks[CAIP2.stockChain]?.rpcUrl, chain.url, 'on the chain the manifest named');
  t.equal(readFileSync(path, 'utf8'), before, 'the manifest is left as it was');
  t.match(lines.join('\n'), /reusing the running devnet/);
  t.ok(chain.asked() >= 2, `the chain was asked (${chain.asked()} calls)`);
});

t.test('a running devnet that does not answer at all is left as it is: the start fails and says how to replace it', async (t) => {
  const chain = await slowChain(chainIdOf(CAIP2.stockChain), undefined);
  t.teardown(() => chain.close());
  const path = join(dir, 'silent.json');
  writeManifest(path, manifestOf(chain.url, process.ppid));
  const before = readFileSync(path, 'utf8');
  const outcome = await startDevnet({ manifestPath: path, host: '127.0.0.1', ports: {}, fresh: false, ownedWaitMs: 2500 }).then(
    () => undefined,
    (err: Error) => err.message,
  );
  t.match(outcome, /does not answer.*--fresh/, 'refused with what to do');
  t.equal(readFileSync(path, 'utf8'), before, 'the manifest is left as it was');
  t.ok(chain.asked() >= 2, `asked again, with longer waits (${chain.asked()} calls)`);
});

t.test('chains that refuse the connection are gone, whoever holds the pid now: new ones are started', async (t) => {
  const chain = await slowChain(chainIdOf(CAIP2.stockChain), 0);
  const url = chain.url;
  await chain.close(); // nothing listens there any more
  const path = join(dir, 'gone.json');
  writeManifest(path, manifestOf(url, process.ppid));
  const devnet = await startDevnet({ manifestPath: path, host: '127.0.0.1', ports: {}, fresh: false, ownedWaitMs: 60_000 }).catch((err: Error) => err);
  if (devnet instanceof Error) throw devnet;
  t.equal(devnet.owned, true, 'a devnet of its own (here: of no chain, as no port was given)');
  t.same(Object.keys(devnet.manifest.networks), [], 'the new manifest names the new chains only');
  await devnet.stop();
});
