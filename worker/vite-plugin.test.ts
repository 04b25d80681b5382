import { fileURLToPath } from 'node:url';
import { createServer, type ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserAlias, postguardFromSources as postguardServiceWorker } from '../lib/build/bundles.js';

/** The postguardServiceWorker() plugin in a Vite dev server (its build path is what the browser specs use). */

let server: ViteDevServer;
let origin: string;

beforeAll(async () => {
  server = await createServer({
    configFile: false,
    root: fileURLToPath(new URL('./test/app/', import.meta.url)),
    base: '/app/',
    logLevel: 'silent',
    resolve: { alias: browserAlias },
    plugins: [postguardServiceWorker()],
    server: { host: '127.0.0.1', port: 0, hmr: false },
  });
  await server.listen();
  origin = `http://127.0.0.1:${(server.httpServer!.address() as { port: number }).port}`;
});

afterAll(() => server?.close());

describe('postguardServiceWorker in the dev server', () => {
  it('serves the service worker as one classic script under the base', async () => {
    const res = await fetch(`${origin}/app/postguard-sw.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/javascript/);
    const code = await res.text();
    // A classic script: no module syntax, everything inlined, no Node built-ins.
    expect(code).not.toMatch(/^[ \t]*(?:import|export)\s/m);
    expect(code).not.toMatch(/node:/);
    expect(code).toContain('pg-download/');
    expect(code).toMatch(/WebAssembly/);
  });

  it('leaves other paths alone', async () => {
    expect((await fetch(`${origin}/postguard-sw.js`)).status).not.toBe(200);
  });
});
