/**
 * `npm run bench -- <scenario> [options]`: each scenario runs in its own process, so one's workers and sockets
 * never skew another's figures. Results land in bench/results/.
 */
import { spawnSync } from 'node:child_process';

const SCENARIOS: Record<string, { files: string[]; about: string }> = {
  verify: {
    files: ['bench/verify-signatures.ts', 'bench/verify-http.ts'],
    about: 'signature verifications per second (worker pool vs the reference @x402/evm scheme), then /verify over HTTP with simulation on and off',
  },
  gateway: {
    files: ['bench/gateway.ts'],
    about: '402 challenges per second against a bare uWebSockets.js hello-world and the @x402/express paywall; paid requests end to end with p50/p99',
  },
  stock: {
    files: ['bench/stock.ts'],
    about: 'completed stock orders per second on the devnet (fresh buyers, official client payments, 14 stocks), p50/p99 from paid request to answer',
  },
};

const [scenario, ...rest] = process.argv.slice(2);
const chosen = scenario ? SCENARIOS[scenario] : undefined;
if (!chosen) {
  process.stderr.write(`usage: npm run bench -- <scenario> [options]\nscenarios:\n${Object.entries(SCENARIOS).map(([k, v]) => `  ${k.padEnd(8)} ${v.about}`).join('\n')}\n`);
  process.exit(scenario ? 2 : 0);
}
for (const file of chosen.files) {
  process.stdout.write(`\n== ${file}\n`);
  const run = spawnSync(process.execPath, ['--import', 'tsx', file, ...rest], { stdio: 'inherit' });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
