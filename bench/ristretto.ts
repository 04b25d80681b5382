/**
 * ristretto255 for GG signatures in Node: @noble/curves against the WebAssembly module, per
 * operation (bench/ristretto-core.ts).
 *
 *   npx tsx bench/ristretto.ts
 *   npx tsx bench/ristretto.ts --repeats 9
 *   npx tsx bench/ristretto.ts --base-window 4 --verifier-window 6 --verifier-teeth 2
 *
 * For the same comparison inside Chromium, see bench/ristretto-browser.ts.
 */
import { parseArgs } from 'node:util';
import {
  DEFAULT_RISTRETTO_OPTIONS,
  ristrettoModule,
  type RistrettoOptions,
} from '../lib/crypto/ristretto-wasm-module.js';
import { instantiateRistrettoWasm, loadRistrettoWasm } from '../lib/crypto/ristretto-wasm.js';
import { formatReport, runRistrettoBench } from './ristretto-core.js';

const { values: args } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    'base-window': { type: 'string' },
    'verifier-window': { type: 'string' },
    'verifier-teeth': { type: 'string' },
    'once-window': { type: 'string' },
  },
});
const repeats = Number(args.repeats);
if (!(repeats >= 1)) throw new Error('--repeats must be positive');
const num = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
const d = DEFAULT_RISTRETTO_OPTIONS;
const options: RistrettoOptions = {
  ...d,
  baseWindow: num(args['base-window'], d.baseWindow) as 4 | 8,
  verifierWindow: num(args['verifier-window'], d.verifierWindow),
  verifierTeeth: num(args['verifier-teeth'], d.verifierTeeth),
  onceWindow: num(args['once-window'], d.onceWindow),
};
const custom = JSON.stringify(options) !== JSON.stringify(d);

const start = performance.now();
const rw = custom ? await instantiateRistrettoWasm(ristrettoModule(options)) : await loadRistrettoWasm();
const loadMs = performance.now() - start;
if (!rw) throw new Error('WebAssembly ristretto255 did not load');
console.log(`Node ${process.versions.node} (V8 ${process.versions.v8}); best of ${repeats} batches`);
console.log(`generator options ${JSON.stringify(options)}\n`);
const report = runRistrettoBench(rw, loadMs, repeats);
for (const line of formatReport(report)) console.log(line);
if (!report.agree) process.exitCode = 1;
