/**
 * Runs inside the Chromium page that bench/shake-browser.ts drives: bundled by Vite, so it
 * imports the library exactly as a browser application would (no node:* anywhere).
 */
import { loadKeccakWasm } from '../lib/crypto/keccak-wasm.js';
import { loadShake128, nobleShake128, shakeBackend } from '../lib/crypto/shake-portable.js';
import { bestOf, segmentData, type ShakeRun } from './shake-core.js';

export interface PageReport {
  readonly userAgent: string;
  readonly portableBackend: string;
  readonly agree: boolean;
  readonly runs: ShakeRun[];
}

async function runShakeBench(totalBytes: number, repeats: number): Promise<PageReport> {
  const segment = segmentData();
  await loadShake128();
  const wasm = await loadKeccakWasm();
  const sample = (create: typeof nobleShake128) => {
    const x = create().update(segment);
    return Array.from(x.clone().update(segment.subarray(0, 1000)).digest(200)).join(',') + x.digest(64).join(',');
  };
  return {
    userAgent: navigator.userAgent,
    portableBackend: shakeBackend,
    agree: sample(wasm.createShake128) === sample(nobleShake128),
    runs: [
      bestOf('@noble/hashes', nobleShake128, totalBytes, 1, segment),
      bestOf('wasm', wasm.createShake128, totalBytes, repeats, segment),
    ],
  };
}

(globalThis as { runShakeBench?: typeof runShakeBench }).runShakeBench = runShakeBench;
