// The logger: JSON lines a machine can parse when logs go to a file or a pipe, readable lines at a terminal, never a
// field named like a secret, and the level the operator asked for.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { createLogger, levelFrom } from '../src/log/logger.ts';

const FIXTURE = resolve('test/fixtures/log-lines.ts');

t.test('JSON lines: one object per entry, with level, time, name, message and the fields', async (t) => {
  const lines: string[] = [];
  const log = createLogger('gate402', { level: 'info', write: (l) => lines.push(l) });
  log.info('settled', { payment: 'p1', amount: 10_000n, err: new Error('boom') });
  log.child({ part: 'engine' }).child({ network: 'eip155:8453' }).error('stuck', { nonce: 7 });
  log.debug('below the level');
  t.equal(lines.length, 2, 'debug is not written at info');
  const [a, b] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(a, { level: 'info', name: 'gate402', msg: 'settled', payment: 'p1', amount: '10000', err: 'boom' });
  t.equal(new Date(a?.time as string).toISOString(), a?.time, 'an ISO time');
  t.match(b, { level: 'error', name: 'gate402', part: 'engine', network: 'eip155:8453', msg: 'stuck', nonce: 7 });
});

t.test('keys named like secrets are dropped, in fields and in child bindings', async (t) => {
  const lines: string[] = [];
  const log = createLogger('gate402', { level: 'debug', write: (l) => lines.push(l) });
  const secret = '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318';
  log.child({ apiKey: secret, part: 'x' }).info('m', { privateKey: secret, Authorization: `Bearer ${secret}`, signature: secret, mnemonic: secret, password: secret, upstreamSecret: secret, kept: 1 });
  t.equal(lines.length, 1);
  t.notMatch(lines[0], secret.slice(2), 'the secret appears nowhere');
  t.match(JSON.parse(lines[0] as string), { part: 'x', kept: 1 });
});

t.test('the pretty form: one readable line per entry, no JSON object, no secret', async (t) => {
  const lines: string[] = [];
  const log = createLogger('gate402', { level: 'info', pretty: true, write: (l) => lines.push(l) });
  log.child({ part: 'stock' }).warn('order refunded', { order: 'o-1', privateKey: '0xfeedface' });
  t.equal(lines.length, 1);
  t.match(lines[0], /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: gate402\/stock: order refunded .*"order":"o-1"/);
  t.notMatch(lines[0], /feedface/);
});

t.test('GATE402_LOG_LEVEL: a known level, else info', async (t) => {
  t.equal(levelFrom('debug'), 'debug');
  t.equal(levelFrom('error'), 'error');
  t.equal(levelFrom(undefined), 'info');
  t.equal(levelFrom('verbose'), 'info');
});

const env = { ...process.env, GATE402_LOG_LEVEL: 'info', NO_COLOR: '1', FORCE_COLOR: '0' };

t.test('to a pipe, the process writes JSON lines on stderr', async (t) => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', FIXTURE], { env, encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const lines = run.stderr
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(lines, [
    { level: 'info', msg: 'listening', port: 4021 },
    { level: 'warn', part: 'engine', msg: 'relayer low on gas', balanceWei: '5' },
  ]);
  t.equal(lines.length, 2);
  t.notMatch(run.stderr, /deadbeef/);
});

// util-linux's script(1) runs the process on a pseudo-terminal, as an operator's shell does.
t.test('at a terminal, the process writes readable lines', { skip: existsSync('/usr/bin/script') ? false : 'no script(1) to make a terminal' }, async (t) => {
  const command = `${process.execPath} --import tsx ${FIXTURE}`;
  const run = spawnSync('/usr/bin/script', ['-qec', command, '/dev/null'], { env, encoding: 'utf8' });
  t.equal(run.status, 0, run.stdout);
  // ANSI colour codes are stripped: what is left is what the operator reads.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ESC starts the colour codes removed here
  const text = run.stdout.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
  const lines = text.trim().split('\n');
  t.equal(lines.length, 2, text);
  t.match(lines[0], /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: gate402: listening .*"port":4021/);
  t.match(lines[1], /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: gate402\/engine: relayer low on gas .*"balanceWei":"5"/);
  t.notMatch(text, /\{"level"/, 'no JSON object');
  t.notMatch(text, /deadbeef/);
});
