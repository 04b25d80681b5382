/**
 * The Node streams in depth: StreamUnsealer and sealStream of the working tree (and, with --ref, of
 * a commit) beside pg-wasm's and the SHAKE128 ceiling, in one process with the sides interleaved
 * round by round, and where each side's CPU time went, per thread (Linux: /proc/self/task/<tid>/schedstat):
 * the calling thread, the hashing thread (lib/crypto/segment-hasher-node.ts) and the rest (V8's
 * garbage-collection helpers, libuv). npm run bench stays the page's figure; this is for finding
 * where the time goes and for A/B runs of one change (bench/README.md, "The Node streams").
 *
 *   node --import tsx bench/node-streams.ts                      256 MiB, 5 rounds, unseal and seal
 *   node --import tsx bench/node-streams.ts --ref main --cases unseal --mib 64 --rounds 16
 *
 * On a loaded machine wall time says little: compare the CPU columns and the paired ratios (each
 * round's side over the first side of the same round, then the median).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, relative } from 'node:path';
import { loadavg } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadPgWasm } from '../test/pgwasm.js';
import { rechunk } from './browser/core.js';
import { fromChunks, generatedSource, median } from './streams.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';

const { values: args } = parseArgs({
  options: {
    mib: { type: 'string', default: '256' },
    rounds: { type: 'string', default: '5' },
    cases: { type: 'string', default: 'unseal,seal' },
    ref: { type: 'string' },
    'no-pg': { type: 'boolean', default: false },
  },
});
const BYTES = Number(args.mib) * 1024 * 1024;
const ROUNDS = Number(args.rounds);
const CHUNK = 64 * 1024;
/** The ceiling's unit, as in bench/run.ts: one 256 KiB segment with its signature, and a fork per segment. */
const SEGMENT = 262_144 + 96;
const repo = fileURLToPath(new URL('..', import.meta.url));

type Lib = typeof import('../lib/index.js');

/** lib/ of a commit, exported with git archive under tmp/ (gitignored), imported beside the tree's. */
async function libAt(ref: string): Promise<{ lib: Lib; label: string }> {
  const git = (...argv: string[]) => execFileSync('git', ['-C', repo, ...argv], { encoding: 'utf8' }).trim();
  const sha = git('rev-parse', '--verify', `${ref}^{commit}`);
  const tree = `${repo}tmp/bench-src/node-${sha}/`;
  await rm(tree, { recursive: true, force: true });
  await mkdir(tree, { recursive: true });
  execFileSync('sh', ['-c', `git -C "${repo}" archive ${sha} lib | tar -x -C "${tree}"`]);
  // tsx maps #aes and #shake through the working tree's tsconfig paths, which would load the tree's
  // AES and hashing thread into the commit's code: point the commit's imports at its own Node modules.
  for (const entry of await readdir(`${tree}lib`, { recursive: true })) {
    if (!entry.endsWith('.ts')) continue;
    const file = `${tree}lib/${entry}`;
    const text = await readFile(file, 'utf8');
    const to = (name: string) => {
      const path = relative(dirname(file), `${tree}lib/crypto/${name}`);
      return `'${path.startsWith('.') ? path : `./${path}`}'`;
    };
    const mapped = text.replaceAll("'#aes'", to('aes-node.js')).replaceAll("'#shake'", to('shake-node.js'));
    if (mapped !== text) await writeFile(file, mapped);
  }
  return {
    lib: (await import(pathToFileURL(`${tree}lib/index.ts`).href)) as Lib,
    label: `${sha.slice(0, 7)} (${ref})`,
  };
}

/** CPU milliseconds so far of each thread of this process, by thread id; empty where /proc is not there. */
function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      try {
        out.set(tid, Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6);
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // not Linux
  }
  return out;
}
const threadIds = () => new Set(threadCpu().keys());

const source = (total: number) => generatedSource(total, CHUNK);
const sink = (keep?: Uint8Array[]) =>
  new WritableStream<Uint8Array>({
    write(c) {
      keep?.push(c);
    },
  });
const mbps = (ms: number) => BYTES / 1e6 / (ms / 1000);

interface Side {
  name: string;
  run: () => Promise<unknown>;
  /** The hashing thread(s) this side's streams use. */
  hashing: Set<string>;
}
interface Sample {
  ms: number;
  main: number;
  hashing: number;
  other: number;
}

async function main() {
  const pg = args['no-pg'] ? undefined : await loadPgWasm();
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const ts = Math.floor(Date.now() / 1000);
  const alice = { ts, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.com' }] };
  const bob = { ts, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' }] };
  const options = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice } };
  const usk = extractUsk(kem.msk, bob);

  const libs: { name: string; lib: Lib; hashing: Set<string> }[] = [];
  const started = async (name: string, lib: Lib) => {
    const before = threadIds();
    await lib.startHashThread();
    const hashing = new Set([...threadIds()].filter((t) => !before.has(t)));
    libs.push({ name, lib, hashing });
  };
  await started('ours', (await import('../lib/index.js')) as Lib);
  if (args.ref) {
    const { lib, label } = await libAt(args.ref);
    await started(`ref ${label}`, lib);
  }

  const chunks: Uint8Array[] = [];
  await libs[0]!.lib.sealStream(kem.mpk, options, source(BYTES), sink(chunks));
  const sealed = rechunk(chunks, CHUNK);
  chunks.length = 0;

  const cases = new Map<string, Side[]>();
  const wanted = args.cases.split(',');
  if (wanted.includes('unseal')) {
    cases.set('StreamUnsealer', [
      ...libs.map(({ name, lib, hashing }) => ({
        name,
        hashing,
        run: async () => (await lib.StreamUnsealer.new(fromChunks(sealed), ibs.vk)).unseal('bob', usk, sink()),
      })),
      ...(pg
        ? [
            {
              name: 'pg-wasm',
              hashing: new Set<string>(),
              run: async () => (await pg.StreamUnsealer.new(fromChunks(sealed), ibs.vk)).unseal('bob', usk, sink()),
            },
          ]
        : []),
    ]);
  }
  if (wanted.includes('seal')) {
    cases.set('sealStream', [
      ...libs.map(({ name, lib, hashing }) => ({
        name,
        hashing,
        run: () => lib.sealStream(kem.mpk, options, source(BYTES), sink()),
      })),
      ...(pg
        ? [
            {
              name: 'pg-wasm',
              hashing: new Set<string>(),
              run: () => pg.sealStream(kem.mpk, options, source(BYTES), sink()),
            },
          ]
        : []),
    ]);
  }

  const samples = new Map<Side, Sample[]>();
  const ceiling: number[] = [];
  const ceilingCpu: number[] = [];
  for (const sides of cases.values()) for (const side of sides) await side.run(); // warm up
  for (let round = 0; round < ROUNDS; round++) {
    for (const sides of cases.values()) {
      for (const side of round % 2 ? [...sides].reverse() : sides) {
        const before = threadCpu();
        const t = performance.now();
        await side.run();
        const ms = performance.now() - t;
        const after = threadCpu();
        const sample: Sample = { ms, main: 0, hashing: 0, other: 0 };
        for (const [tid, cpu] of after) {
          const used = cpu - (before.get(tid) ?? 0);
          if (tid === String(process.pid)) sample.main += used;
          else if (side.hashing.has(tid)) sample.hashing += used;
          else if (![...libs].some((l) => l.hashing.has(tid))) sample.other += used;
        }
        samples.set(side, [...(samples.get(side) ?? []), sample]);
      }
    }
    // The ceiling, as in bench/run.ts: SHAKE128 over 512 segments with a fork per segment, on this thread.
    const seg = new Uint8Array(SEGMENT).fill(1);
    const h = createHash('shake128');
    const cpu0 = threadCpu().get(String(process.pid)) ?? 0;
    const t = performance.now();
    for (let i = 0; i < 512; i++) {
      h.update(seg);
      h.copy({ outputLength: 64 }).digest();
    }
    ceiling.push(((512 * SEGMENT) / 1e6 / (performance.now() - t)) * 1000);
    ceilingCpu.push((((threadCpu().get(String(process.pid)) ?? 0) - cpu0) * BYTES) / (512 * SEGMENT));
  }

  const limit = Math.max(...ceiling);
  console.log(
    `Node ${process.version}, ${BYTES >> 20} MiB in 64 KiB chunks, ${ROUNDS} rounds, load ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
  console.log(
    `SHAKE128 ceiling: ${limit.toFixed(0)} MB/s (best round; median ${median(ceiling).toFixed(0)}); ` +
      `its CPU for the stream's bytes: ${median(ceilingCpu).toFixed(0)} ms`,
  );
  for (const [name, sides] of cases) {
    console.log(`\n${name}`);
    const first = samples.get(sides[0]!)!;
    const pgSide = sides.find((s) => s.name === 'pg-wasm');
    const pgRate = pgSide ? mbps(median(samples.get(pgSide)!.map((s) => s.ms))) : undefined;
    for (const side of sides) {
      const xs = samples.get(side)!;
      const rate = mbps(median(xs.map((s) => s.ms)));
      const paired = (f: (s: Sample) => number) => median(xs.map((s, i) => f(s) / f(first[i]!))).toFixed(2);
      console.log(
        `  ${side.name.padEnd(24)} ${rate.toFixed(0).padStart(5)} MB/s  ${((100 * rate) / limit).toFixed(0).padStart(3)}% of the ceiling` +
          (pgRate && side !== pgSide ? `  ${(rate / pgRate).toFixed(2)}x pg-wasm` : '') +
          `  CPU ms: calling thread ${median(xs.map((s) => s.main)).toFixed(0)}, hashing thread ${median(xs.map((s) => s.hashing)).toFixed(0)}, other threads ${median(xs.map((s) => s.other)).toFixed(0)}` +
          `  runs ${xs.map((s) => mbps(s.ms).toFixed(0)).join(' ')}` +
          (side === sides[0]
            ? ''
            : `  paired vs ${sides[0]!.name}: time ${paired((s) => s.ms)}, CPU ${paired((s) => s.main + s.hashing + s.other)}`),
      );
    }
  }
  process.exit(0);
}

await main();
