/**
 * SHAKE128 backends in Node, on the streaming-signature pattern (bench/shake-core.ts):
 *
 *   npx tsx bench/shake.ts               256 MiB per run
 *   npx tsx bench/shake.ts --mib 64 --repeats 5
 *
 * For the same comparison inside Chromium, see bench/shake-browser.ts.
 */
import { parseArgs } from 'node:util';
import { loadKeccakWasm } from '../lib/crypto/keccak-wasm.js';
import { createShake128 as nodeShake128 } from '../lib/crypto/shake-node.js';
import { nobleShake128 } from '../lib/crypto/shake-portable.js';
import { bestOf, formatRun, segmentData, SEGMENT_BYTES } from './shake-core.js';

const { values: args } = parseArgs({
  options: { mib: { type: 'string', default: '256' }, repeats: { type: 'string', default: '3' } },
});
const total = Number(args.mib) * 2 ** 20;
const repeats = Number(args.repeats);
if (!(total >= SEGMENT_BYTES) || !(repeats >= 1)) throw new Error('--mib and --repeats must be positive');

const segment = segmentData();
const wasm = await loadKeccakWasm();
console.log(`Node ${process.versions.node} (V8 ${process.versions.v8}); ${args.mib} MiB in 256 KiB segments,`);
console.log('each followed by clone + digest(64); best of', repeats, '(noble: one run)\n');
console.log(formatRun(bestOf('@noble/hashes', nobleShake128, total, 1, segment)));
console.log(formatRun(bestOf('wasm', wasm.createShake128, total, repeats, segment)));
console.log(formatRun(bestOf('node:crypto', nodeShake128, total, repeats, segment)));
