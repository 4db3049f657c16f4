import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './devnet.ts';
import { killOnExit, tempDir } from './temp-dir.ts';

/** Debian's `prometheus` package (installed by .ci/run) puts both here. */
export const PROMETHEUS = '/usr/bin/prometheus';
export const PROMTOOL = '/usr/bin/promtool';
/** The longest a Prometheus started here lives, whatever happens to the test that started it. */
const LIFETIME_SECONDS = 600;

export interface PrometheusServer {
  url: string;
  dir: string;
  child: ChildProcess;
  /** An instant query through the HTTP API; throws with Prometheus's error when the query is refused. */
  query(promql: string): Promise<InstantResult>;
  /** `/api/v1/<path>`'s `data`. */
  api<T>(path: string): Promise<T>;
  stop(): Promise<void>;
}

export interface InstantResult {
  resultType: 'vector' | 'scalar' | 'matrix' | 'string';
  result: Array<{ metric: Record<string, string>; value: [number, string] }> | [number, string];
}

export interface ScrapeJob {
  name: string;
  target: string;
}

/** `promtool <args>`: its output, or a thrown error carrying it. */
export function promtool(args: string[], cwd?: string): string {
  try {
    return execFileSync(PROMTOOL, args, { encoding: 'utf8', timeout: 30_000, ...(cwd ? { cwd } : {}) });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`promtool ${args.join(' ')}: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/**
 * A real Prometheus scraping `jobs` and evaluating `ruleFiles` every `intervalSeconds`, its data in a temp dir, on a
 * free port (started again on another when a different process takes the probed one first).
 */
export async function startPrometheus(opts: { jobs: ScrapeJob[]; ruleFiles?: string[]; intervalSeconds?: number }): Promise<PrometheusServer> {
  const dir = tempDir('prometheus');
  const every = `${opts.intervalSeconds ?? 1}s`;
  const config = [
    'global:',
    `  scrape_interval: ${every}`,
    `  scrape_timeout: ${every}`,
    `  evaluation_interval: ${every}`,
    ...(opts.ruleFiles?.length ? ['rule_files:', ...opts.ruleFiles.map((f) => `  - ${JSON.stringify(f)}`)] : []),
    'scrape_configs:',
    ...opts.jobs.flatMap((j) => [`  - job_name: ${JSON.stringify(j.name)}`, '    static_configs:', `      - targets: [${JSON.stringify(j.target)}]`]),
    '',
  ].join('\n');
  const configPath = join(dir, 'prometheus.yml');
  writeFileSync(configPath, config);
  promtool(['check', 'config', configPath]);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(dir, configPath, await freePort());
    } catch (err) {
      if (attempt >= 3 || !/address already in use/.test((err as Error).message)) throw err;
    }
  }
}

async function startOnce(dir: string, configPath: string, port: number): Promise<PrometheusServer> {
  const logPath = join(dir, `prometheus-${port}.log`);
  // Under coreutils' timeout, which passes SIGTERM on: a test killed before its teardown leaves no Prometheus for long.
  const child = spawn(
    'timeout',
    ['--kill-after=5', String(LIFETIME_SECONDS), PROMETHEUS, `--config.file=${configPath}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    {
      stdio: ['ignore', openSync(logPath, 'a'), openSync(logPath, 'a')],
    },
  );
  killOnExit(child, 'SIGTERM');
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}:\n${readFileSync(logPath, 'utf8')}`);
    const ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`prometheus was not ready in 30 s:\n${readFileSync(logPath, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}/api/v1/${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data?: T; error?: string; errorType?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.errorType}: ${body.error}`);
    return body.data as T;
  };
  return {
    url,
    dir,
    child,
    api,
    query: (promql) => api<InstantResult>(`query?query=${encodeURIComponent(promql)}`),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
