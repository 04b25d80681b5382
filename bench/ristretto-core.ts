import { ristretto255 } from '@noble/curves/ed25519.js';
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/utils.js';
import type { RistrettoWasm } from '../lib/crypto/ristretto-wasm.js';

/**
 * The elliptic-curve work of one GG-signed stream segment, timed per operation for
 * @noble/curves and for the WebAssembly module side by side (wire-format §6, §9):
 *
 *   sign        ga = enc(a·B) for a fresh secret nonce a
 *   verify      b·B − d·Q = dec(ga), Q = gr + c·PK fixed per stream (prepared once)
 *   verify-1    the same without a prepared Q (a one-signature message)
 *   prepare     what preparing Q costs
 *
 * Platform-neutral so Node and the browser page share it.
 */

const Point = ristretto255.Point;
const L = Point.Fn.ORDER;
const SEGMENT_BYTES = 256 * 1024;

export interface OpRow {
  readonly op: string;
  readonly noble: number;
  readonly wasm: number;
}

export interface RistrettoReport {
  readonly rows: OpRow[];
  readonly agree: boolean;
  readonly loadMs: number;
}

/** Deterministic scalars (xorshift), so every run times the same inputs. */
function scalars(n: number, seed: number): bigint[] {
  let x = seed >>> 0 || 1;
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) {
    const bytes = new Uint8Array(64);
    for (let j = 0; j < 64; j++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      bytes[j] = x & 0xff;
    }
    out.push(bytesToNumberLE(bytes) % L);
  }
  return out;
}

/** µs per call: the best of `repeats` timed batches after one warm-up batch. */
function perCall(batch: number, repeats: number, fn: (i: number) => unknown): number {
  let sink = 0;
  const run = () => {
    const start = performance.now();
    for (let i = 0; i < batch; i++) if (fn(i)) sink++;
    return ((performance.now() - start) * 1000) / batch;
  };
  run();
  let best = Infinity;
  for (let r = 0; r < repeats; r++) best = Math.min(best, run());
  if (sink < 0) throw new Error('unreachable');
  return best;
}

export function runRistrettoBench(rw: RistrettoWasm, loadMs: number, repeats: number): RistrettoReport {
  const n = 64;
  const [as, ys, ds] = [scalars(n, 1), scalars(n, 2), scalars(n, 3)];
  const bytes = (k: bigint) => numberToBytesLE(k, 32);
  const q = Point.BASE.multiply(ys[0]!);
  const qBytes = q.toBytes();
  const cases = as.map((a, i) => {
    const d = ds[i]!;
    const b = (a + ys[0]! * d) % L;
    return { a: bytes(a), b: bytes(b), d: bytes(d), bn: b, dn: d, ga: Point.BASE.multiply(a).toBytes() };
  });

  const qPre = Point.fromBytes(qBytes);
  qPre.precompute(8, false);
  const verifier = rw.prepareVerifier(qBytes);
  const nobleVerify = (c: (typeof cases)[number], qp: InstanceType<typeof Point>) =>
    Point.BASE.multiplyUnsafe(c.bn).subtract(qp.multiplyUnsafe(c.dn)).equals(Point.fromBytes(c.ga));

  const [c0, c1, c2] = cases as [(typeof cases)[number], (typeof cases)[number], (typeof cases)[number]];
  const agree =
    cases.every(
      (c, i) =>
        equalBytes(rw.baseMulEncode(c.a), Point.BASE.multiply(as[i]!).toBytes()) &&
        verifier.check(c.b, c.d, c.ga) &&
        nobleVerify(c, qPre),
    ) &&
    !verifier.check(c0.b, c1.d, c0.ga) &&
    rw.checkOnce(qBytes, c2.b, c2.d, c2.ga);

  const pick = <T>(arr: readonly T[], i: number) => arr[i % arr.length]!;
  const rows: OpRow[] = [
    {
      op: 'sign: enc(a·B)',
      noble: perCall(300, repeats, (i) => Point.BASE.multiply(pick(as, i)).toBytes()[0]),
      wasm: perCall(3000, repeats, (i) => rw.baseMulEncode(pick(cases, i).a)[0]),
    },
    {
      op: 'verify, prepared Q',
      noble: perCall(300, repeats, (i) => nobleVerify(pick(cases, i), qPre)),
      wasm: perCall(3000, repeats, (i) => verifier.check(pick(cases, i).b, pick(cases, i).d, pick(cases, i).ga)),
    },
    {
      op: 'verify, one-shot',
      noble: perCall(100, repeats, (i) => nobleVerify(pick(cases, i), Point.fromBytes(qBytes))),
      wasm: perCall(1000, repeats, (i) => rw.checkOnce(qBytes, pick(cases, i).b, pick(cases, i).d, pick(cases, i).ga)),
    },
    {
      op: 'prepare Q',
      noble: perCall(20, repeats, () => Point.fromBytes(qBytes).precompute(8, false)),
      wasm: perCall(100, repeats, () => rw.prepareVerifier(qBytes)),
    },
  ];
  return { rows, agree, loadMs };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Lines for a report: µs per operation and the streaming rate the EC work alone would cap. */
export function formatReport(report: RistrettoReport): string[] {
  // bytes per µs = MB/s; shown in GB/s
  const cap = (us: number) => `${(SEGMENT_BYTES / us / 1000).toFixed(1)} GB/s`;
  const cells = (op: string, noble: string, wasm: string, ratio: string) =>
    `${op.padEnd(22)} ${noble.padStart(10)} ${wasm.padStart(10)} ${ratio.padStart(9)}`;
  const lines = [cells('operation', 'noble µs', 'wasm µs', 'speed-up') + '   EC-only cap at 256 KiB/segment'];
  for (const r of report.rows) {
    const capNote = r.op.startsWith('prepare') ? '' : `   ${cap(r.wasm)} (noble ${cap(r.noble)})`;
    lines.push(cells(r.op, r.noble.toFixed(1), r.wasm.toFixed(1), `${(r.noble / r.wasm).toFixed(1)}×`) + capNote);
  }
  lines.push(
    '',
    `wasm instance ready in ${report.loadMs.toFixed(1)} ms (generate, compile, build the base table)`,
    `results agree with noble: ${report.agree}`,
  );
  return lines;
}
