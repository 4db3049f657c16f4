#!/usr/bin/env node
/**
 * After a failed `npm test`: every failing assertion, as the last thing the CI log shows (the CI shows only its tail).
 *
 *   node .ci/failures.mjs [npm-test.log]
 *
 * Reads tap's per-file results (.tap/test-results/**\/*.tap): for each failing assertion, its file, the names of the
 * subtests it sits in, its own name, where it is and its diagnostic (the `found`/`wanted` or the output a test
 * attached), shortened. A file that failed without a failing assertion in its results (killed by the timeout, or
 * exited non-zero) is named from the `not ok` lines of the log, when the log is given; a type-check error too.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Parser } from 'tap-parser';

const RESULTS = '.tap/test-results';
/** Diagnostic keys not shown: where the assertion is comes from `at`, in one line. */
const HIDDEN = new Set(['at', 'stack', 'source', 'test']);
const MAX_DIAG_CHARS = 1500;

function tapFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tapFiles(join(dir, e.name)) : e.name.endsWith('.tap') ? [join(dir, e.name)] : []));
}

/** The failing assertions of one results file: [{ path: names from the file's top, diag }]. */
function failuresOf(text) {
  const out = [];
  const parser = new Parser();
  const watch = (p, path) => {
    const children = new Map();
    p.on('child', (c) => {
      const record = { failed: 0 };
      children.set(c.name, record);
      c.on('assert', (a) => {
        if (!a.ok && !a.todo && !a.skip) record.failed++;
      });
      watch(c, [...path, c.name]);
    });
    p.on('assert', (a) => {
      if (a.ok || a.todo || a.skip) return;
      // A subtest's own `not ok` repeats its failing assertions, already listed: kept only when it has none (a timeout, a throw).
      const child = children.get(a.name);
      if (child && child.failed > 0 && !a.diag?.tapCaught && !a.diag?.expired) return;
      out.push({ path: [...path, a.name], diag: a.diag ?? {} });
    });
  };
  watch(parser, []);
  parser.end(text);
  return out;
}

function describe(diag) {
  const lines = [];
  const at = diag.at ? `${diag.at.fileName ?? ''}:${diag.at.lineNumber ?? '?'}` : undefined;
  if (at) lines.push(`at ${at}`);
  for (const key of Object.keys(diag)) {
    if (HIDDEN.has(key) || diag[key] === undefined) continue;
    const value = typeof diag[key] === 'string' ? diag[key] : JSON.stringify(diag[key]);
    lines.push(`${key}: ${value.length > MAX_DIAG_CHARS ? `${value.slice(0, MAX_DIAG_CHARS)} …(${value.length} chars)` : value}`);
  }
  return lines.join('\n').replace(/^/gm, '      ');
}

const logPath = process.argv[2];
const log = logPath && existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
// With the log, only the files this run ran (results of files it did not run may be left from an earlier run).
const ran = new Set([...log.matchAll(/^(?:not )?ok \d+ - (\S+)/gm)].map((m) => m[1]));
const failures = [];
for (const file of tapFiles(RESULTS).sort()) {
  const name = relative(RESULTS, file).replace(/\.tap$/, '');
  if (ran.size > 0 && !ran.has(name)) continue;
  for (const f of failuresOf(readFileSync(file, 'utf8'))) failures.push({ file: name, ...f });
}
const filesWithAssertions = new Set(failures.map((f) => f.file));
// Top-level `not ok N - test/x.test.ts # ...` lines: files that failed, with or without an assertion in their results.
const failedFiles = [...log.matchAll(/^not ok \d+ - (\S+)(.*)$/gm)].map((m) => ({ file: m[1], note: m[2].trim() }));
const typeErrors = [...log.matchAll(/^.*error TS\d+:.*$/gm)].map((m) => m[0]);

const out = ['', '======== failing assertions of this run ========'];
for (const f of failures) out.push(`not ok  ${f.file}  ::  ${f.path.join('  >  ')}`, describe(f.diag));
for (const f of failedFiles.filter((f) => !filesWithAssertions.has(f.file)))
  out.push(`not ok  ${f.file}  (failed with no failing assertion in its results${f.note ? `: ${f.note}` : ''}; see its output above)`);
for (const line of typeErrors.slice(0, 30)) out.push(`type check: ${line}`);
if (failures.length === 0 && failedFiles.length === 0 && typeErrors.length === 0)
  out.push('no failing assertion found in .tap/test-results: the failure is in the output above (a lint, type-check or setup step?)');
out.push(`======== ${failures.length} failing assertion(s) in ${new Set([...filesWithAssertions, ...failedFiles.map((f) => f.file)]).size} file(s) ========`);
process.stdout.write(`${out.join('\n')}\n`);
