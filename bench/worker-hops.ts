/**
 * Why Firefox's crypto worker hashes on its own thread (worker/README.md, "A hashing worker in
 * Firefox"): two measurements in each engine, on a page that starts workers from blob: scripts.
 *
 *   hops    a "crypto" worker sends 512 segments of 256 KiB (12 in flight, transferred) to a
 *           "hashing" worker and gets each back: nested (the crypto worker started it) against
 *           page-started with a MessageChannel port between the two workers.
 *   starts  a module worker that starts a nested module worker at load, then answers three pings
 *           from the page: how many of N never answer (15 s each), against one that starts none.
 *
 *   node --import tsx bench/worker-hops.ts
 *   node --import tsx bench/worker-hops.ts --engines firefox --starts 100
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { ENGINES, launch, type Engine } from '../e2e/engines/driver.js';

const { values: args } = parseArgs({
  options: { engines: { type: 'string', default: ENGINES.join(',') }, starts: { type: 'string', default: '50' } },
});

/** The page's program; runs in the browser only. */
const PAGE = String.raw`
const script = (text) => URL.createObjectURL(new Blob([text], { type: 'text/javascript' }));
const HASHER = script("const serve = (ep) => { ep.onmessage = (e) => { const b = e.data; new Uint8Array(b)[0]++; ep.postMessage(b, [b]); }; };" +
  "self.onmessage = (e) => { if (e.ports[0]) serve(e.ports[0]); else { serve(self); self.onmessage(e); } };");
const CRYPTO = script("let ep; self.onmessage = async (e) => {" +
  " if (e.ports[0]) ep = e.ports[0]; else if (e.data === 'nest') ep = new Worker(" + JSON.stringify(HASHER) + ");" +
  " else { const N = e.data; let sent = 0, got = 0; const t = performance.now();" +
  "  await new Promise((done) => { ep.onmessage = (m) => { got++; if (sent < N) { ep.postMessage(m.data, [m.data]); sent++; } if (got === N) done(); };" +
  "   for (let i = 0; i < 12; i++) { const b = new ArrayBuffer(262144); ep.postMessage(b, [b]); sent++; } });" +
  "  self.postMessage(performance.now() - t); } };");
globalThis.hops = async (mode) => {
  const crypto = new Worker(CRYPTO);
  let hasher;
  if (mode === 'port') {
    hasher = new Worker(HASHER);
    const { port1, port2 } = new MessageChannel();
    hasher.postMessage(null, [port1]);
    crypto.postMessage(null, [port2]);
  } else crypto.postMessage('nest');
  const ms = await new Promise((resolve) => { crypto.onmessage = (e) => resolve(e.data); crypto.postMessage(512); });
  crypto.terminate();
  hasher?.terminate();
  return ms;
};
const ECHO = script("const serve = (ep) => { ep.onmessage = (e) => { const b = e.data; ep.postMessage(b, [b]); }; };" +
  "self.onmessage = (e) => { if (e.ports[0]) serve(e.ports[0]); else { serve(self); self.onmessage(e); } };");
globalThis.pageHops = async (mode) => {
  const w = new Worker(ECHO);
  let ep = w;
  if (mode === 'port') {
    const { port1, port2 } = new MessageChannel();
    w.postMessage(null, [port2]);
    ep = port1;
  }
  const N = 512;
  let sent = 0, got = 0, postMs = 0;
  const post = (b) => { const t = performance.now(); ep.postMessage(b, [b]); postMs += performance.now() - t; sent++; };
  const t = performance.now();
  await new Promise((done) => {
    ep.onmessage = (m) => { got++; if (sent < N) post(m.data); if (got === N) done(); };
    for (let i = 0; i < 12; i++) post(new ArrayBuffer(262144));
  });
  const ms = performance.now() - t;
  w.terminate();
  if (mode === 'port') ep.close();
  return [ms, postMs];
};
const NESTED = script("self.onmessage = () => {}; import('data:text/javascript,export default 1').then(() => self.postMessage('ready'));");
globalThis.starts = async (nest, n) => {
  const url = script((nest ? "new Worker(" + JSON.stringify(NESTED) + ", { type: 'module' }); " : '') + "self.onmessage = () => self.postMessage('pong');");
  let silent = 0;
  for (let i = 0; i < n; i++) {
    const w = new Worker(url, { type: 'module' });
    let ok = true;
    for (let k = 0; k < 3 && ok; k++) {
      w.postMessage('ping');
      ok = await new Promise((r) => { const t = setTimeout(() => r(false), 15000); w.onmessage = () => { clearTimeout(t); r(true); }; });
    }
    if (!ok) silent++;
    w.terminate();
  }
  return silent;
};
`;

const server = createServer((_, res) => {
  res.setHeader('content-type', 'text/html');
  res.end(`<!doctype html><title>worker hops</title><script>${PAGE}</script>`);
}).listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const { port } = server.address() as { port: number };
declare const hops: (mode: string) => Promise<number>;
declare const pageHops: (mode: string) => Promise<[number, number]>;
declare const starts: (nest: boolean, n: number) => Promise<number>;
try {
  for (const engine of args.engines.split(',') as Engine[]) {
    const browser = await launch(engine);
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${port}/`);
      const ms: Record<string, number[]> = { nested: [], port: [] };
      for (let i = 0; i < 3; i++) {
        for (const mode of ['nested', 'port']) ms[mode]!.push(Math.round(await page.evaluate((m) => hops(m), mode)));
      }
      console.log(
        `${engine}: 512 round trips of 256 KiB, ms per run: nested ${ms.nested!.join(', ')}; port ${ms.port!.join(', ')}`,
      );
      const page2: Record<string, string[]> = { worker: [], port: [] };
      for (let i = 0; i < 3; i++) {
        for (const mode of ['worker', 'port']) {
          const [all, post] = await page.evaluate((m) => pageHops(m), mode);
          page2[mode]!.push(`${Math.round(all)} (posting ${Math.round(post)})`);
        }
      }
      console.log(
        `${engine}: 512 round trips of 256 KiB between the page and a worker, ms per run: Worker.postMessage ${page2.worker!.join(', ')}; MessageChannel port ${page2.port!.join(', ')}`,
      );
      const n = Number(args.starts);
      if (n === 0) continue;
      const none = await page.evaluate(([k]) => starts(false, k), [n] as const);
      const nested = await page.evaluate(([k]) => starts(true, k), [n] as const);
      console.log(
        `${engine}: workers that never answered three pings: ${nested} of ${n} with a nested start, ${none} of ${n} without`,
      );
    } finally {
      await browser.close();
    }
  }
} finally {
  server.close();
}
