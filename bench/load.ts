/**
 * The benches' one load generator and process starter. Requests run from this process over pooled keep-alive
 * connections; its own CPU use is reported, so a run whose generator was the bottleneck says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request, type Dispatcher } from 'undici';

export interface LoadRequest {
  url: string;
  method?: Dispatcher.HttpMethod;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50ms: number;
  p99ms: number;
  /** Count per status code (`error` for a failed request), or per `classify` outcome when one is given. */
  outcomes: Record<string, number>;
  loadGeneratorCpuPercent: number;
}

/**
 * `workers` concurrent loops for `seconds`, or until `make` returns undefined. `classify` names each answer
 * (default: its status code).
 */
export async function load(make: (i: number) => LoadRequest | undefined, seconds: number, workers: number, classify?: (status: number, body: string) => string): Promise<LoadResult> {
  const dispatcher = new Agent({ connections: workers, pipelining: 1 });
  const latencies: number[] = [];
  const outcomes: Record<string, number> = {};
  let next = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < until) {
        const job = make(next++);
        if (!job) return;
        const t0 = performance.now();
        let outcome: string;
        try {
          const res = await request(job.url, { method: job.method ?? 'GET', headers: job.headers ?? {}, ...(job.body !== undefined ? { body: job.body } : {}), dispatcher });
          if (classify) outcome = classify(res.statusCode, await res.body.text());
          else {
            await res.body.dump();
            outcome = String(res.statusCode);
          }
        } catch {
          outcome = 'error';
        }
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await dispatcher.close();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => Number((latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0).toFixed(2));
  return { requestsPerSecond: Math.round(latencies.length / elapsed), p50ms: pct(0.5), p99ms: pct(0.99), outcomes, loadGeneratorCpuPercent: Math.round(((cpu.user + cpu.system) / 1e6 / elapsed) * 100) };
}

/** Starts a server process and resolves once its output matches `ready`. */
export function startChild(args: string[], env: Record<string, string> = {}, ready = /^ready$|gate402 is up|^facilitator: /m): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GATE402_LOG_LEVEL: 'error', ...env } });
  return new Promise((res, rej) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      if (ready.test(out)) res(child);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => rej(new Error(`${args.join(' ')} exited ${code}:\n${out}`)));
  });
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}
