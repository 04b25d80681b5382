import { fileURLToPath } from 'node:url';
import { build } from 'vite';

/** Bundles one browser entry (an ES module) in memory with Vite and returns its code. */
export async function bundleEntry(entry: URL, fileName: string): Promise<string> {
  const result = await build({
    configFile: false,
    root: fileURLToPath(new URL('..', import.meta.url)),
    logLevel: 'warn',
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: { entry: fileURLToPath(entry), formats: ['es'], fileName },
    },
  });
  for (const out of Array.isArray(result) ? result : [result]) {
    if (!('output' in out)) continue;
    const chunk = out.output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('vite produced no entry chunk');
}
