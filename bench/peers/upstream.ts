// The local upstream of the paid benches, in a process of its own so that neither stack's memory or CPU counts
// it: gate402's catalog fixtures, which gate402 (catjoke) and the official seller both forward to.
//   node --import tsx bench/peers/upstream.ts <port>
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';

const upstreams = await startFixtureUpstreams({ host: '127.0.0.1', port: Number(process.argv[2]) });
process.stdout.write('ready\n');
process.on('SIGTERM', () => void upstreams.close().then(() => process.exit(0)));
