import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from '@playwright/test';
import { build, type Plugin } from 'vite';
import { chromiumLaunchOptions } from './chromium.js';

/**
 * A library module in Chromium, bundled by Vite the way an application would bundle it: `source`
 * is the page's own module (it imports the library and sets `globalThis[name]` to an API over
 * plain values); `open` loads the bundle into a blank page and calls that API from Node.
 */
export interface BundledPage<Api extends Record<string, (...args: never[]) => Promise<unknown>>> {
  call<K extends keyof Api>(name: K, ...args: Parameters<Api[K]>): ReturnType<Api[K]>;
  close(): Promise<void>;
}

export async function bundlePage(name: string, source: string): Promise<string> {
  const entry = `virtual:${name}-page`;
  const virtualPage: Plugin = {
    name: `${name}-page`,
    // lib mode may hand the entry over resolved against the root
    resolveId: (id) => (id.endsWith(entry) ? `\0${entry}` : undefined),
    load: (id) => (id === `\0${entry}` ? source : undefined),
  };
  const result = await build({
    configFile: false,
    root: fileURLToPath(new URL('..', import.meta.url)),
    logLevel: 'warn',
    plugins: [virtualPage],
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: { entry, formats: ['es'], fileName: 'page' },
    },
  });
  for (const out of Array.isArray(result) ? result : [result]) {
    if (!('output' in out)) continue;
    const chunk = out.output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('vite produced no entry chunk');
}

export async function openBundledPage<Api extends Record<string, (...args: never[]) => Promise<unknown>>>(
  name: string,
  code: string,
): Promise<BundledPage<Api>> {
  const browser: Browser = await chromium.launch(chromiumLaunchOptions);
  const page = await browser.newPage();
  await page.setContent(`<!doctype html><title>${name}</title>`);
  await page.addScriptTag({ content: code, type: 'module' });
  await page.waitForFunction((n) => n in globalThis, name);
  return {
    call: (method, ...args) =>
      page.evaluate(
        ([n, m, a]) => {
          const api = (globalThis as unknown as Record<string, Record<string, (...x: unknown[]) => unknown>>)[n]!;
          return api[m]!(...a);
        },
        [name, method as string, args as unknown[]] as const,
      ) as ReturnType<Api[typeof method]>,
    close: () => browser.close(),
  };
}
