/**
 * Runs inside the Chromium page that bench/ristretto-browser.ts drives: bundled by Vite, so it
 * imports the library exactly as a browser application would (no node:* anywhere).
 */
import { loadRistrettoWasm } from '../lib/crypto/ristretto-wasm.js';
import { runRistrettoBench, type RistrettoReport } from './ristretto-core.js';

export interface PageReport extends RistrettoReport {
  readonly userAgent: string;
}

async function runRistrettoBenchInPage(repeats: number): Promise<PageReport> {
  const start = performance.now();
  const rw = await loadRistrettoWasm();
  const loadMs = performance.now() - start;
  if (!rw) throw new Error('WebAssembly ristretto255 did not load');
  return { userAgent: navigator.userAgent, ...runRistrettoBench(rw, loadMs, repeats) };
}

(globalThis as { runRistrettoBench?: typeof runRistrettoBenchInPage }).runRistrettoBench = runRistrettoBenchInPage;
