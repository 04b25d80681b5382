import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signChallenge } from '../../lib/index.js';
import { fakePkgKeys } from '../../client/testing.js';
import {
  EMAIL,
  benignEmail,
  craftedEmail,
  sealedBy,
  withSignerPolicy,
  type SealedPair,
} from '../../test/crafted-header.js';
import { startStorage, uploadWhole, type RunningStorage } from './testing.js';

/**
 * pg-storage reads the sender from an upload's header at finalize, in the request's own turn of
 * the event loop: the header signature's policy, which a stranger writes. An upload signed by an
 * e-mail of "a", ~1 MiB of spaces and "a" (test/crafted-header.ts) once held that turn for
 * minutes, and every other request (/health too) waited. Now finalize answers it as fast as a
 * benign upload, proof of possession included, and /health answers throughout; a signer policy
 * flooded with attributes is refused (422) as promptly.
 */

const BOUND_MS = 3000;
const keys = fakePkgKeys();
const ts = Math.floor(Date.now() / 1000);
const recipient = { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] };
const plain = new TextEncoder().encode('uploaded by a long address');
const timings: string[] = [];
let storage: RunningStorage;
let crafted: SealedPair;
let benign: SealedPair;

beforeAll(async () => {
  storage = await startStorage({ verifyingKey: keys.vk, sessionTtlSeconds: 600 });
  crafted = await sealedBy(keys, craftedEmail(), recipient, plain);
  benign = await sealedBy(keys, benignEmail(), recipient, plain);
}, 120_000);

afterAll(async () => {
  await storage?.close();
  if (process.env['LINEAR_TIME_LOG'] !== undefined) for (const line of timings) console.log(`[crafted] ${line}`);
});

/**
 * Finalizes while asking /health every 10 ms, and once more after: the finalize's status and time,
 * and the slowest /health answer (which includes any time the event loop was held).
 */
async function finalizeWatched(
  what: string,
  file: Uint8Array<ArrayBuffer>,
  proofKey?: string,
): Promise<{ status: number; ms: number; slowestHealthMs: number; healthChecks: number }> {
  const { uuid, token, challenge } = await uploadWhole(storage.url, file);
  const proof = proofKey === undefined ? undefined : signChallenge(proofKey, uuid, challenge);
  const start = performance.now();
  let done = false;
  const finalized = fetch(`${storage.url}/fileupload/finalize/${uuid}`, {
    method: 'POST',
    headers: {
      cryptifytoken: token,
      'content-range': `bytes */${file.length}`,
      ...(proof === undefined ? {} : { 'x-postguard-proof': Buffer.from(proof).toString('base64') }),
    },
  }).then((response) => {
    done = true;
    return { status: response.status, ms: performance.now() - start };
  });
  // Each /health is timed from when it was due (its 10 ms timer's deadline, or now for the first
  // and last), so time the event loop spent elsewhere before the request could be sent counts too.
  const health = async (due: number) => {
    const response = await fetch(`${storage.url}/health`);
    expect(response.status).toBe(200);
    await response.text();
    return performance.now() - due;
  };
  const latencies = [await health(performance.now())];
  while (!done) {
    const due = performance.now() + 10;
    await new Promise((resolve) => setTimeout(resolve, 10));
    latencies.push(await health(due));
  }
  latencies.push(await health(performance.now()));
  const { status, ms } = await finalized;
  const slowestHealthMs = Math.max(...latencies);
  timings.push(
    `finalize (${what}): ${ms.toFixed(1)} ms, HTTP ${status}; slowest of ${latencies.length} /health: ${slowestHealthMs.toFixed(1)} ms`,
  );
  return { status, ms, slowestHealthMs, healthChecks: latencies.length };
}

describe('finalize of an upload signed by an e-mail of a million spaces', () => {
  it('answers as promptly as a benign upload, proof of possession included, and /health answers throughout', async () => {
    for (const [what, pair] of [
      ['benign', benign],
      ['crafted', crafted],
    ] as const) {
      const stream = pair.stream as Uint8Array<ArrayBuffer>;
      expect(stream.length).toBeGreaterThan(1024 * 1024);
      const result = await finalizeWatched(what, stream, pair.key);
      expect(result.status).toBe(200);
      expect(result.ms, `finalize (${what})`).toBeLessThan(BOUND_MS);
      expect(result.slowestHealthMs, `/health during finalize (${what})`).toBeLessThan(BOUND_MS);
    }
    const mails = await storage.outbox();
    const last = mails.at(-1)!;
    expect(last.sender).toBe(craftedEmail());
    expect(last.senderVerified).toBe(true);
    expect(last.senderProven).toBe(true);
  });

  it('refuses a signer policy flooded with attributes (422) as promptly', async () => {
    const flood = { ts, con: Array.from({ length: Math.floor((1024 * 1024 - 1024) / 9) }, () => ({ t: '' })) };
    const file = withSignerPolicy(benign.stream, flood) as Uint8Array<ArrayBuffer>;
    const result = await finalizeWatched('flood', file);
    expect(result.status).toBe(422);
    expect(result.ms).toBeLessThan(BOUND_MS);
    expect(result.slowestHealthMs).toBeLessThan(BOUND_MS);
  });
});
