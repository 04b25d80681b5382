import { DEFAULT_SEGMENT_SIZE, sealStream } from '../lib/index.js';
import { splitFrame } from '../lib/frame.js';
import { extractSigningKey, extractUsk } from '../lib/keys.js';
import type { Policy } from '../lib/policy.js';
import { SEGMENT_OVERHEAD } from '../lib/segments.js';
import { EMAIL, type Stack } from './fixtures.js';

/**
 * Ciphertexts made in Node with the stack's master keys (what another PostGuard client would send),
 * and the cuts and bit flips that the failure specs apply to them.
 */

/** Policies for `recipients` at a timestamp the PKG has already seen (a key request must not be in its future). */
export function policyFor(recipients: string[], ts = Math.floor(Date.now() / 1000) - 1): Record<string, Policy> {
  return Object.fromEntries(recipients.map((r) => [r, { ts, con: [{ t: EMAIL, v: r }] }]));
}

/** A signing key as the PKG would issue it for `email`. */
export function signingKeyFor(stack: Stack, email: string, ts = Math.floor(Date.now() / 1000) - 1) {
  const policy = { ts, con: [{ t: EMAIL, v: email }] };
  return { key: extractSigningKey(stack.keys.sk, policy), policy };
}

/** The user secret key the PKG would issue to whoever proves `policy`. */
export const uskFor = (stack: Stack, policy: Policy): string => extractUsk(stack.keys.msk, policy);

export async function collect(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of readable as unknown as AsyncIterable<Uint8Array>) parts.push(chunk);
  return new Uint8Array(Buffer.concat(parts));
}

/** Seals `plain` in streaming mode with postguard-ts for e-mail recipients, signed as `sender`. */
export function sealInNode(stack: Stack, recipients: string[], sender: string, plain: Uint8Array): Promise<Uint8Array> {
  return sealWithPolicy(stack, policyFor(recipients), sender, plain);
}

export async function sealWithPolicy(
  stack: Stack,
  policy: Record<string, Policy>,
  sender: string,
  plain: Uint8Array,
): Promise<Uint8Array> {
  const out = new TransformStream<Uint8Array, Uint8Array>();
  const collected = collect(out.readable);
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(plain);
      controller.close();
    },
  });
  await sealStream(stack.keys.mpk, { policy, pubSignKey: signingKeyFor(stack, sender) }, source, out.writable);
  return collected;
}

/** Where the payload starts and how long a whole segment is on the wire. */
export function layout(ct: Uint8Array): { framing: number; segment: number } {
  return { framing: splitFrame(ct).framingBytes, segment: DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD };
}
