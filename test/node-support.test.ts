// Which Node.js gate402 runs on: the command line's check, package.json's `engines`, and the uWebSockets.js binaries
// they follow agree; on another Node the command prints one line and starts nothing.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { enginesRange, SUPPORTED_NODE, unsupportedNodeMessage } from '../src/cli/node-support.mjs';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };

t.test('supported: Node 22 from 22.12 and Node 20 from 20.19; nothing else', async (t) => {
  for (const v of ['v22.12.0', 'v22.23.3', 'v20.19.0', 'v20.20.2', process.version]) t.equal(unsupportedNodeMessage(v), undefined, `${v} runs`);
  for (const v of ['v24.0.0', 'v24.11.1', 'v23.11.0', 'v21.7.3', 'v22.11.0', 'v20.18.3', 'v18.20.8', 'v25.0.0', 'nonsense', '']) {
    const line = unsupportedNodeMessage(v);
    t.ok(line, `${v} is refused`);
    t.notMatch(line, /\n/, 'in one line');
    t.match(line, /use Node\.js 22 \(22\.12 or later\) or 20 \(20\.19 or later\)/, 'naming the supported versions');
  }
});

t.test("package.json's engines says the same", async (t) => {
  t.equal(pkg.engines.node, enginesRange());
  t.equal(enginesRange(), '^20.19.0 || ^22.12.0');
});

t.test('the uWebSockets.js build in use has a Linux x64 binary for Node 20 and 22 and none past 22', async (t) => {
  // Node's module ABI: 115 is Node 20, 127 Node 22; 131 (Node 23) and 137 (Node 24) would be the next.
  const abis = readdirSync('node_modules/uWebSockets.js/dist/bin')
    .map((f) => /^uws_linux_x64_(\d+)\.node$/.exec(f)?.[1])
    .filter((a): a is string => a !== undefined)
    .map(Number);
  t.ok(abis.includes(115) && abis.includes(127), `ABIs shipped: ${abis.join(', ')}`);
  t.same(
    abis.filter((a) => a > 127),
    [],
    'no binary for Node 23 or later: were there one, SUPPORTED_NODE could grow',
  );
  t.ok(
    SUPPORTED_NODE.every((r) => r.major <= 22),
    'no supported major without a binary',
  );
  t.ok(abis.includes(Number(process.versions.modules)), `this Node (${process.version}, ABI ${process.versions.modules}) has its binary`);
});

t.test('the command on Node 24: one line naming the supported versions, exit 1, no stack trace', async (t) => {
  // process.version faked before bin.mjs runs, as a Node 24 would report it.
  const fake = `data:text/javascript,Object.defineProperty(process,'version',{value:'v24.11.1'})`;
  for (const command of ['start', 'pay']) {
    const run = spawnSync(process.execPath, ['--import', fake, 'src/cli/bin.mjs', command], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' } });
    t.equal(run.status, 1, `${command}: exit 1`);
    t.equal(run.stdout, '', `${command}: nothing on stdout`);
    t.equal(run.stderr, `${unsupportedNodeMessage('v24.11.1')}\n`, `${command}: exactly the one line`);
    t.notMatch(run.stderr, /\n\s+at /, `${command}: no stack trace`);
  }
});
