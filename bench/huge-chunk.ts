/**
 * One huge chunk through the streaming API: what a caller gets who hands sealStream (or a
 * StreamUnsealer) a whole file as a single Uint8Array. Prints the peak RSS growth and the longest
 * stall of the event loop while it runs; neither should grow with the chunk.
 *
 *   node --expose-gc --import tsx bench/huge-chunk.ts [--mib=256]
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { StreamUnsealer, sealStream } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';

const { values: args } = parseArgs({ options: { mib: { type: 'string', default: '256' } } });
const BYTES = Number(args.mib) * 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

function oneChunk(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      c.enqueue(bytes);
      c.close();
    },
  });
}

function counter(keep?: Uint8Array[]): WritableStream<Uint8Array> {
  return new WritableStream({ write: (c) => void keep?.push(c) });
}

async function measure(name: string, run: () => Promise<unknown>): Promise<void> {
  gc();
  await new Promise((r) => setTimeout(r, 50));
  const base = process.memoryUsage().rss;
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const t = performance.now();
  await run();
  const ms = performance.now() - t;
  delay.disable();
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  const stall = delay.max / 1e6;
  console.log(
    `${name.padEnd(40)} ${(BYTES / 1e6 / (ms / 1000)).toFixed(0).padStart(5)} MB/s   peak RSS +${((peak - base) / 2 ** 20).toFixed(0)} MiB   longest loop stall ${stall.toFixed(0)} ms`,
  );
}

const kem = generateKemKeys();
const ibs = generateSigningKeys();
const bob = { ts: Math.floor(Date.now() / 1000), con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' }] };
const options = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob } };
const usk = extractUsk(kem.msk, bob);

const plain = new Uint8Array(BYTES).map((_, i) => i & 255);
console.log(`one ${args.mib} MiB chunk, Node ${process.version}`);
await measure('sealStream, one chunk in', () => sealStream(kem.mpk, options, oneChunk(plain), counter()));
const sealed: Uint8Array[] = [];
await sealStream(kem.mpk, options, oneChunk(plain), counter(sealed));
const whole = new Uint8Array(sealed.reduce((n, c) => n + c.length, 0));
let at = 0;
for (const c of sealed.splice(0)) {
  whole.set(c, at);
  at += c.length;
}
await measure('StreamUnsealer, one chunk in', async () => {
  const unsealer = await StreamUnsealer.new(oneChunk(whole), ibs.vk);
  await unsealer.unseal('bob', usk, counter());
});
