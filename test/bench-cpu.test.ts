import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { clockTicksPerSecond, cpuWindow, processCpuSeconds, statCpuTicks } from '../bench/cpu.ts';

// The bench charges a server for the CPU of its whole process tree: a server that hands work to a child process (alive,
// or exited and reaped) must not look cheaper than one that does the work itself.

t.test('/proc/<pid>/stat: utime + stime + cutime + cstime, after a command name with spaces and parentheses', async (t) => {
  const fields = Array.from({ length: 50 }, (_, i) => String(i + 3)); // field 3 (state) onwards, each its own number
  fields[0] = 'S';
  t.equal(statCpuTicks(`4242 (node (my) server) ${fields.join(' ')}`), 14 + 15 + 16 + 17);
  t.equal(statCpuTicks('garbage'), undefined);
  t.equal(processCpuSeconds(2 ** 30), undefined, 'no such process');
  t.ok((processCpuSeconds(process.pid) ?? 0) > 0, 'this process has used some CPU');
});

/** A parent that only waits, whose child burns `burnMs` of CPU (however long the machine takes to give it), then stays alive or exits; the parent prints `burned` then. */
function parentOfBurner(burnMs: number, childExits: boolean) {
  const child = `for (let u = process.cpuUsage(); u.user + u.system < ${burnMs * 1000}; u = process.cpuUsage()); ${childExits ? '' : 'process.stdout.write("x"); setInterval(() => {}, 1000);'}`;
  const parent = `
    const c = require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(child)}], { stdio: ['ignore', 'pipe', 'inherit'] });
    ${childExits ? "c.on('exit', () => console.log('burned'));" : "c.stdout.once('data', () => console.log('burned'));"}
    process.on('SIGTERM', () => { c.kill(); process.exit(0); });
    setInterval(() => {}, 1000);`;
  const p = spawn(process.execPath, ['-e', parent], { stdio: ['ignore', 'pipe', 'inherit'] });
  const burned = new Promise<void>((res) => p.stdout.on('data', (d: Buffer) => d.toString().includes('burned') && res()));
  return { p, burned };
}

for (const childExits of [false, true]) {
  t.test(`a child's CPU counts for its parent (the child ${childExits ? 'exited and was reaped' : 'still running'})`, async (t) => {
    const { p, burned } = parentOfBurner(600, childExits);
    t.teardown(() => {
      p.kill();
    });
    const window = cpuWindow({ server: p.pid });
    await burned;
    const cost = window.end(1);
    const own = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
    const fields = own.slice(own.lastIndexOf(')') + 2).split(' ');
    const parentOnly = (Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond();
    t.ok((cost.seconds.server ?? 0) >= 0.5, `the tree used ${cost.seconds.server} s, the child's 0.6 s of burning included`);
    t.ok(parentOnly < (cost.seconds.server ?? 0) - 0.4, `the parent alone used ${parentOnly} s`);
    t.ok(Math.abs((cost.msPer200.total ?? 0) - (cost.totalSeconds ?? 0) * 1000) < 0.01, 'per 200: all of it over one answer');
  });
}
