// The local upstream of the paid benches, in a process of its own so that neither stack's memory or CPU counts
// it: gate402's catalog fixtures, which gate402 (catjoke) and the official seller both forward to.
// It listens on a port the kernel gives it and prints `listening on <origin>`.
//   node --import tsx bench/peers/upstream.ts
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';

const upstreams = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening on http://127.0.0.1:${upstreams.port}\n`);
process.on('SIGTERM', () => void upstreams.close().then(() => process.exit(0)));
