import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

/**
 * The benchmarks' results as files people and programs can read: each run of `npm run bench`
 * (node) or `npm run bench:browser` (browser) writes docs/performance/<kind>.json, then
 * docs/performance.md and one SVG chart per kind are drawn again from whichever results are there.
 * The page says which machine, commit and date each figure comes from; nothing here measures.
 */

/** One printed row of a benchmark table: ours beside a peer or a limit, in MB/s or ms. */
export interface ResultRow {
  name: string;
  unit: 'ms' | 'MB/s';
  ours?: number;
  theirs?: number;
}

export interface EngineResult {
  engine: string;
  userAgent: string;
  group: 'stream' | 'sw';
  rows: ResultRow[];
}

interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  load: number[];
  node: string;
}

interface ResultFile {
  kind: 'node' | 'browser';
  date: string;
  commit: string;
  dirty: boolean;
  machine: Machine;
  source?: string;
  settings?: Record<string, number>;
  rows?: ResultRow[];
  engines?: EngineResult[];
}

const repo = fileURLToPath(new URL('..', import.meta.url));
const folder = `${repo}docs/performance/`;
const page = `${repo}docs/performance.md`;

function git(...argv: string[]): string {
  try {
    return execFileSync('git', ['-C', repo, ...argv], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

/** Writes the result of one run and draws the page again. Returns the files written. */
export async function writeResult(
  kind: 'node' | 'browser',
  result: Pick<ResultFile, 'source' | 'settings' | 'rows' | 'engines'>,
): Promise<string[]> {
  const file: ResultFile = {
    kind,
    date: new Date().toISOString(),
    commit: git('rev-parse', '--short', 'HEAD'),
    dirty: git('status', '--porcelain', '--', 'lib', 'worker', 'client', 'bench').length > 0,
    machine: {
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      load: loadavg().map((l) => Number(l.toFixed(1))),
      node: process.version,
    },
    ...result,
  };
  await mkdir(folder, { recursive: true });
  await writeFile(`${folder}${kind}.json`, JSON.stringify(file, null, 2) + '\n');
  return [`docs/performance/${kind}.json`, ...(await renderPage())];
}

async function readResult(kind: 'node' | 'browser'): Promise<ResultFile | undefined> {
  try {
    return JSON.parse(await readFile(`${folder}${kind}.json`, 'utf8')) as ResultFile;
  } catch {
    return undefined;
  }
}

/** A bar of a chart: whose figure it is decides its colour. */
export interface Bar {
  label: string;
  value: number;
  who: 'ours' | 'peer' | 'limit';
}

export interface BarGroup {
  title: string;
  bars: Bar[];
}

const COLOURS: Record<Bar['who'], string> = { ours: '#2f6fde', peer: '#e0892b', limit: '#9aa0a6' };
const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Horizontal bars in MB/s, one scale for the whole chart, a legend on top. */
export function barChart(title: string, groups: BarGroup[]): string {
  const width = 760;
  const labelWidth = 300;
  const barArea = width - labelWidth - 80;
  const barHeight = 16;
  const max = Math.max(1, ...groups.flatMap((g) => g.bars.map((b) => b.value)));
  const lines: string[] = [];
  let y = 30;
  lines.push(`<text x="10" y="18" font-weight="bold">${escapeXml(title)}</text>`);
  let legendX = labelWidth;
  for (const [who, text] of [
    ['ours', 'postguard-ts'],
    ['peer', '@e4a/pg-wasm 0.5.10'],
    ['limit', 'limit'],
  ] as const) {
    lines.push(`<rect x="${legendX}" y="8" width="12" height="12" fill="${COLOURS[who]}"/>`);
    lines.push(`<text x="${legendX + 16}" y="18">${text}</text>`);
    legendX += 150;
  }
  for (const group of groups) {
    y += 14;
    lines.push(`<text x="10" y="${y + 12}" font-weight="bold">${escapeXml(group.title)}</text>`);
    y += 18;
    for (const bar of group.bars) {
      const w = Math.max(1, Math.round((bar.value / max) * barArea));
      lines.push(`<text x="20" y="${y + 12}">${escapeXml(bar.label)}</text>`);
      lines.push(`<rect x="${labelWidth}" y="${y}" width="${w}" height="${barHeight}" fill="${COLOURS[bar.who]}"/>`);
      lines.push(`<text x="${labelWidth + w + 6}" y="${y + 12}">${bar.value.toFixed(0)} MB/s</text>`);
      y += barHeight + 4;
    }
  }
  const height = y + 12;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `font-family="sans-serif" font-size="12">\n<rect width="100%" height="100%" fill="#fff"/>\n` +
    lines.join('\n') +
    '\n</svg>\n'
  );
}

const find = (rows: ResultRow[], start: string) => rows.find((r) => r.name.startsWith(start));
const bar = (label: string, value: number | undefined, who: Bar['who']): Bar[] =>
  value === undefined || !Number.isFinite(value) ? [] : [{ label, value, who }];

/** The browser result as bar groups: per engine, streams in the crypto worker, then the service worker. */
export function browserGroups(result: ResultFile): BarGroup[] {
  const groups: BarGroup[] = [];
  const engines = [...new Set((result.engines ?? []).map((e) => e.engine))];
  for (const engine of engines) {
    const stream = result.engines!.find((e) => e.engine === engine && e.group === 'stream')?.rows ?? [];
    const sw = result.engines!.find((e) => e.engine === engine && e.group === 'sw')?.rows ?? [];
    if (stream.length > 0) {
      const sealWorker = find(stream, 'sealStream');
      const sealMain = stream.find((r) => r.name.startsWith('sealStream') && r.name.includes('main thread'));
      const openWorker = find(stream, 'StreamUnsealer');
      const openMain = stream.find((r) => r.name.startsWith('StreamUnsealer') && r.name.includes('main thread'));
      groups.push({
        title: `${engine}: seal and unseal a stream`,
        bars: [
          ...bar('seal, our crypto worker', sealWorker?.ours, 'ours'),
          ...bar('seal, pg-wasm in a worker', sealWorker?.theirs, 'peer'),
          ...bar('seal, pg-wasm on the main thread', sealMain?.theirs, 'peer'),
          ...bar('unseal, our crypto worker', openWorker?.ours, 'ours'),
          ...bar('unseal, pg-wasm in a worker', openWorker?.theirs, 'peer'),
          ...bar('unseal, pg-wasm on the main thread', openMain?.theirs, 'peer'),
        ],
      });
    }
    if (sw.length > 0) {
      groups.push({
        title: `${engine}: a download through the decrypting service worker`,
        bars: [
          ...bar(
            'service worker, verifyFirst: false',
            sw.find((r) => r.name.includes('verifyFirst: false'))?.ours,
            'ours',
          ),
          ...bar('service worker, defaults (verify first)', sw.find((r) => r.name.includes('defaults'))?.ours, 'ours'),
          ...bar('a service worker doing nothing', find(sw, 'pipe:')?.ours, 'limit'),
          ...bar('Blob URL (no decryption)', find(sw, 'limit: Blob URL')?.ours, 'limit'),
          ...bar('SHAKE128 on one thread', find(sw, 'limit: SHAKE128')?.ours, 'limit'),
        ],
      });
    }
  }
  return groups;
}

/** The Node result as bar groups: the streaming rows beside pg-wasm and the SHAKE128 ceiling. */
export function nodeGroups(result: ResultFile): BarGroup[] {
  const rows = result.rows ?? [];
  const ceiling = rows.find((r) => r.name.startsWith('limit: SHAKE128 node:crypto'))?.ours;
  return rows
    .filter((r) => r.unit === 'MB/s' && !r.name.startsWith('limit:'))
    .map((r) => ({
      title: r.name,
      bars: [
        ...bar('postguard-ts', r.ours, 'ours'),
        ...bar('@e4a/pg-wasm', r.theirs, 'peer'),
        ...(r.name.startsWith('sealStream') || r.name.startsWith('StreamUnsealer')
          ? bar('SHAKE128 ceiling (node:crypto, one thread)', ceiling, 'limit')
          : []),
      ],
    }));
}

function table(rows: ResultRow[], theirs: string): string[] {
  const fmt = (v: number | undefined, unit: string) =>
    v === undefined || !Number.isFinite(v)
      ? ''
      : unit === 'ms'
        ? `${v.toFixed(v < 100 ? 1 : 0)} ms`
        : `${v.toFixed(0)} MB/s`;
  const out = [`| case | postguard-ts | ${theirs} | ratio |`, '|---|---|---|---|'];
  for (const r of rows) {
    const ratio =
      r.ours !== undefined && r.theirs !== undefined && r.ours > 0 && r.theirs > 0
        ? `${(r.unit === 'ms' ? r.theirs / r.ours : r.ours / r.theirs).toFixed(2)}x`
        : '';
    out.push(`| ${r.name.trim()} | ${fmt(r.ours, r.unit)} | ${fmt(r.theirs, r.unit)} | ${ratio} |`);
  }
  return out;
}

const about = (r: ResultFile) =>
  `${r.date.slice(0, 16).replace('T', ' ')} UTC, commit \`${r.commit}\`${r.dirty ? ' (with uncommitted changes)' : ''}, ` +
  `${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.memoryGiB} GiB, load ${r.machine.load.join(' ')}, Node ${r.machine.node}`;

/** Draws docs/performance.md and the charts from the results on disk; returns the files written. */
export async function renderPage(): Promise<string[]> {
  const written: string[] = [];
  const browser = await readResult('browser');
  const node = await readResult('node');
  const out: string[] = [
    '# Performance',
    '',
    'Drawn by the benchmarks themselves: `npm run bench:browser` and `npm run bench` write',
    '`docs/performance/*.json` (every figure, machine-readable) and redraw this page and its charts',
    '(bench/report.ts). Each figure is ours beside `@e4a/pg-wasm` 0.5.10 or beside a limit, from the',
    'same run; compare figures from one run only. The machine is small and shared (2 cores), so the',
    'load is given with each run. How the figures are taken: bench/README.md.',
    '',
  ];
  if (browser) {
    await writeFile(
      `${folder}browser.svg`,
      barChart('In the browser (MB/s, higher is better)', browserGroups(browser)),
    );
    written.push('docs/performance/browser.svg');
    out.push('## In the browser', '', about(browser) + '.', '', `Source: ${browser.source ?? ''}.`, '');
    out.push(
      '![Browser benchmark: per engine, our crypto worker and service worker beside pg-wasm and the limits](performance/browser.svg)',
      '',
    );
    for (const e of browser.engines ?? []) {
      out.push(
        `### ${e.engine}: ${e.group === 'stream' ? 'streams in the crypto worker' : 'service-worker download'}`,
        '',
      );
      out.push(`${e.userAgent}`, '');
      out.push(...table(e.rows, e.group === 'stream' ? 'pg-wasm' : 'the limit'), '');
    }
    out.push(
      'The limit of a download is the lower of the plaintext served from a Blob URL and SHAKE128 over',
      'the same bytes on one thread (the format hashes the whole payload in order). A service worker',
      "that makes its body for free shows the browser's own pipe between the worker and the page.",
      '',
    );
  }
  if (node) {
    await writeFile(`${folder}node.svg`, barChart('In Node (MB/s, higher is better)', nodeGroups(node)));
    written.push('docs/performance/node.svg');
    out.push('## In Node', '', about(node) + '.', '');
    out.push('![Node benchmark: postguard-ts beside pg-wasm and the SHAKE128 ceiling](performance/node.svg)', '');
    out.push(...table(node.rows ?? [], 'pg-wasm'), '');
    const ceiling = node.rows?.find((r) => r.name.startsWith('limit: SHAKE128 node:crypto'))?.ours;
    for (const r of node.rows ?? []) {
      if (ceiling && r.ours && (r.name.startsWith('sealStream') || r.name.startsWith('StreamUnsealer')))
        out.push(`- ${r.name}: ${((100 * r.ours) / ceiling).toFixed(0)} % of the SHAKE128 ceiling of the same run.`);
    }
    out.push('');
  }
  await writeFile(page, out.join('\n'));
  written.push('docs/performance.md');
  return written;
}
