/**
 * Where the crypto worker's streaming time goes, per engine (worker/README.md, "Where the crypto
 * worker's time goes"): bench/browser/phases.worker.ts runs the library's sealStream and
 * StreamUnsealer as the crypto worker does (SHAKE128 on a nested hashing worker) and times them in
 * parts, in rounds, beside the real crypto worker and pg-wasm in a worker (bench:browser's cases),
 * all in one page:
 *
 *   aes        WebCrypto AES-GCM alone, 1 and 4 in flight; "in call" is the share of the time spent
 *              inside subtle.encrypt/decrypt itself (on the calling thread)
 *   hash       256 KiB segments to the hashing worker and back, 12 in flight
 *   local      sealStream / StreamUnsealer with source and sink inside the worker (no relay)
 *   echo       the relay alone: page → worker → page over worker/port-stream.ts, no crypto
 *   relay      sealStream / StreamUnsealer over the relay (the crypto worker's path), with the
 *              AES-GCM calls' and hashing round trips' summed latencies
 *   ours       the real crypto worker (PostGuardWorker), as bench:browser measures it
 *   pg-wasm    pg-wasm in a worker, as bench:browser measures it
 *
 *   node --import tsx bench/worker-phases.ts --engines webkit --rounds 5 --mib 64
 *   node --import tsx bench/worker-phases.ts --only ours,pg-wasm --with-ports   (ours-ports: a MessagePort per stream)
 */
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Engine } from '../e2e/engines/driver.js';
import type { EnginesBench, StreamRun } from './browser/engines.js';
import type { PhaseRun, Variant } from './browser/phases.worker.js';
import { makeKeys, openEnginesPage, serveEnginesPage } from './engines-page.js';
import { TICK_MS, threadTicks } from './thread-cpu.js';

const { values: args } = parseArgs({
  options: {
    engines: { type: 'string', default: 'webkit' },
    rounds: { type: 'string', default: '5' },
    mib: { type: 'string', default: '64' },
    only: { type: 'string', default: '' },
    /** A/B variants of the relayed cases: "name:window=KiB,batch=KiB,out=KiB,depth=n;..." ("base" is the product). */
    variants: { type: 'string', default: 'base' },
    /** Also the real crypto worker with a MessagePort per stream (bench:browser's --with-ports). */
    'with-ports': { type: 'boolean', default: false },
  },
});
const MiB = 2 ** 20;
const BYTES = Number(args.mib) * MiB;
const ROUNDS = Number(args.rounds);
const SEGMENTS = BYTES / (256 * 1024);
const only = args.only.split(',').filter(Boolean);
const variants = args.variants
  .split(';')
  .filter(Boolean)
  .map((spec) => {
    const [name, settings = ''] = spec.split(':');
    const variant: Variant = {};
    for (const kv of settings.split(',').filter(Boolean)) {
      const [k, v] = kv.split('=');
      const n = Number(v);
      if (k === 'window') variant.windowBytes = n * 1024;
      else if (k === 'batch') variant.batchBytes = n * 1024;
      else if (k === 'out') variant.outWindowBytes = n * 1024;
      else if (k === 'depth') variant.depth = n;
      else throw new Error(`unknown setting ${k}`);
    }
    return { name: name!, variant };
  });

declare const benchEngines: EnginesBench;
const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/bench-phases/`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

type Case = { name: string; run: () => Promise<PhaseRun | StreamRun> };

const server = await serveEnginesPage(repo, outDir);
const keys = makeKeys();
try {
  for (const engine of args.engines.split(',') as Engine[]) {
    const { browser, page } = await openEnginesPage(engine, server.url);
    try {
      const info = await page.evaluate((a) => benchEngines.init(a.k, '/pg-wasm_bg.wasm', a.ports), {
        k: keys,
        ports: args['with-ports'],
      });
      const nested = await page.evaluate(() => benchEngines.phasesInit(), undefined);
      console.log(`\n== ${engine}: ${info.userAgent}; phases worker's hashing worker: ${nested}; load ${load()}`);
      await page.evaluate((b) => benchEngines.prepare('full', b, 64 * 1024), BYTES);
      await page.evaluate((b) => benchEngines.phase({ op: 'prepare', bytes: b }), BYTES);
      const phase = (call: Parameters<EnginesBench['phase']>[0]) => async () =>
        (await page.evaluate((c) => benchEngines.phase(c), call)) as PhaseRun;
      const cases: Case[] = [
        {
          name: 'aes encrypt, 1 in flight',
          run: phase({ op: 'aes', direction: 'encrypt', inFlight: 1, segments: SEGMENTS }),
        },
        {
          name: 'aes encrypt, 4 in flight',
          run: phase({ op: 'aes', direction: 'encrypt', inFlight: 4, segments: SEGMENTS }),
        },
        {
          name: 'aes decrypt, 1 in flight',
          run: phase({ op: 'aes', direction: 'decrypt', inFlight: 1, segments: SEGMENTS }),
        },
        {
          name: 'aes decrypt, 4 in flight',
          run: phase({ op: 'aes', direction: 'decrypt', inFlight: 4, segments: SEGMENTS }),
        },
        { name: 'shake inline', run: phase({ op: 'shake', segments: SEGMENTS }) },
        { name: 'hash round trips, 12 in flight', run: phase({ op: 'hash', inFlight: 12, segments: SEGMENTS }) },
        ...variants.map(({ name, variant }) => ({
          name: `echo (relay alone) ${name}`,
          run: phase({ op: 'echo', bytes: BYTES, variant }),
        })),
        { name: 'local seal (no relay)', run: phase({ op: 'local-seal', bytes: BYTES }) },
        ...variants.map(({ name, variant }) => ({
          name: `relay seal ${name}`,
          run: phase({ op: 'relay-seal', bytes: BYTES, variant }),
        })),
        { name: 'ours seal', run: () => page.evaluate((b) => benchEngines.seal('ours', b, 64 * 1024), BYTES) },
        ...(args['with-ports']
          ? [
              {
                name: 'ours-ports seal',
                run: () => page.evaluate((b) => benchEngines.seal('ours-ports', b, 64 * 1024), BYTES),
              },
            ]
          : []),
        {
          name: 'pg-wasm worker seal',
          run: () => page.evaluate((b) => benchEngines.seal('pgwasm-worker', b, 64 * 1024), BYTES),
        },
        { name: 'local unseal (no relay)', run: phase({ op: 'local-unseal', bytes: BYTES }) },
        ...variants.map(({ name, variant }) => ({
          name: `relay unseal ${name}`,
          run: phase({ op: 'relay-unseal', variant }),
        })),
        { name: 'ours unseal', run: () => page.evaluate(() => benchEngines.decrypt('ours', 'full'), undefined) },
        ...(args['with-ports']
          ? [
              {
                name: 'ours-ports unseal',
                run: () => page.evaluate(() => benchEngines.decrypt('ours-ports', 'full'), undefined),
              },
            ]
          : []),
        {
          name: 'pg-wasm worker unseal',
          run: () => page.evaluate(() => benchEngines.decrypt('pgwasm-worker', 'full'), undefined),
        },
      ].filter((c) => only.length === 0 || only.some((o) => c.name.includes(o)));
      const runs = new Map<string, (PhaseRun | StreamRun)[]>(cases.map((c) => [c.name, []]));
      const cpu = new Map<string, Map<string, number>>(cases.map((c) => [c.name, new Map()]));
      const loads: string[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        for (const c of cases) {
          const before = threadTicks();
          runs.get(c.name)!.push(await c.run());
          const sums = cpu.get(c.name)!;
          for (const [thread, t] of threadTicks())
            sums.set(thread, (sums.get(thread) ?? 0) + t - (before.get(thread) ?? 0));
        }
        loads.push(load());
      }
      console.log(`rounds: ${ROUNDS}, load after each: ${loads.join(' | ')}`);
      for (const c of cases) {
        const rs = runs.get(c.name)!;
        const rate = (r: PhaseRun | StreamRun) => ('bytes' in r && r.bytes > 0 ? r.bytes : BYTES) / 1e6 / (r.ms / 1000);
        const m = median(rs.map(rate));
        let extra = '';
        const phaseRuns = rs.filter((r): r is PhaseRun => 'aes' in r && r.aes !== undefined);
        if (phaseRuns.length) {
          const per = (pick: (r: PhaseRun) => number) => median(phaseRuns.map(pick));
          const aes = phaseRuns[0]!.aes!;
          const hash = phaseRuns[0]!.hash!;
          if (aes.calls) {
            extra += `; AES ${aes.calls} calls: in call ${per((r) => r.aes!.syncMs / r.aes!.calls).toFixed(3)} ms each (${per((r) => (100 * r.aes!.syncMs) / r.ms).toFixed(0)}% of the run), settled after ${per((r) => r.aes!.latencyMs / r.aes!.calls).toFixed(2)} ms`;
          }
          if (hash.calls) {
            extra += `; hash ${hash.calls} calls: ${per((r) => r.hash!.syncMs / r.hash!.calls).toFixed(3)} ms to post, answered after ${per((r) => r.hash!.latencyMs / r.hash!.calls).toFixed(2)} ms`;
          }
        }
        console.log(
          `  ${c.name.padEnd(36)} ${m.toFixed(0).padStart(5)} MB/s  [${rs.map((r) => rate(r).toFixed(0)).join(', ')}]${extra}`,
        );
        // CPU per 64 MiB moved, by thread (the busiest), summed over the rounds.
        const sums = [...cpu.get(c.name)!].filter(([, t]) => t > 0).sort((a, b) => b[1] - a[1]);
        const total = sums.reduce((a, [, t]) => a + t, 0);
        const per = (t: number) => ((t * TICK_MS) / ROUNDS) * ((64 * MiB) / BYTES);
        console.log(
          `      CPU ms per 64 MiB: total ${per(total).toFixed(0)}; ` +
            sums
              .slice(0, 9)
              .map(([k, t]) => `${k} ${per(t).toFixed(0)}`)
              .join(', '),
        );
      }
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.close();
}
