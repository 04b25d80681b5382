import { open } from 'node:fs/promises';
import { StreamUnsealer } from 'postguard-ts';
import { PREAMBLE_BYTES, parsePreamble, parseSignatureLength } from 'postguard-ts/format';
import type { Attribute, Policy } from 'postguard-ts';
import { decodeSignatureExt } from 'postguard-ts/format';

/**
 * Who sent an upload: the public signing identity in the header of the stored ciphertext,
 * read at finalize as Cryptify reads it. With the PKG's verifying key the header signature is
 * checked first (Cryptify always does); without one (a development convenience of the
 * stand-in) the claimed identity is taken unverified and marked so.
 */

export interface SenderIdentity {
  /** The value of the configured e-mail attribute; undefined when the attribute carries no value. */
  email: string | undefined;
  /** The other public attributes that carry a value, as [type, value]. */
  attributes: Array<[string, string]>;
  verified: boolean;
  /** The whole public signing policy, as the header names it (what a proof of possession is checked against). */
  policy: Policy;
}

export class SenderError extends Error {
  override readonly name = 'SenderError';
}

/** Reads only the framing (at most about 2 MiB, bounded by the format), never the payload. */
async function readFrame(path: string): Promise<Uint8Array> {
  const file = await open(path, 'r');
  try {
    const read = async (position: number, length: number): Promise<Uint8Array> => {
      const buffer = new Uint8Array(length);
      const { bytesRead } = await file.read(buffer, 0, length, position);
      if (bytesRead !== length) throw new SenderError('the stored file ends inside the PostGuard header');
      return buffer;
    };
    const preamble = await read(0, PREAMBLE_BYTES);
    const headerLength = parsePreamble(preamble);
    const signatureLength = parseSignatureLength(await read(PREAMBLE_BYTES + headerLength, 4));
    return read(0, PREAMBLE_BYTES + headerLength + 4 + signatureLength);
  } finally {
    await file.close();
  }
}

async function publicIdentity(frame: Uint8Array, verifyingKey: string | undefined): Promise<Policy> {
  if (verifyingKey === undefined) {
    const headerLength = parsePreamble(frame.subarray(0, PREAMBLE_BYTES));
    return decodeSignatureExt(frame.subarray(PREAMBLE_BYTES + headerLength + 4)).policy;
  }
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(frame);
      controller.close();
    },
  });
  return (await StreamUnsealer.new(source, verifyingKey)).public_identity();
}

export async function readSender(
  path: string,
  verifyingKey: string | undefined,
  emailAttribute: string,
): Promise<SenderIdentity> {
  const policy = await publicIdentity(await readFrame(path), verifyingKey);
  const con = policy.con;
  const emailEntry = con.find((a) => a.t === emailAttribute);
  if (emailEntry === undefined) throw new SenderError(`the sender identity has no ${emailAttribute} attribute`);
  const attributes = con
    .filter((a): a is Required<Attribute> => a.t !== emailAttribute && typeof a.v === 'string')
    .map((a): [string, string] => [a.t, a.v]);
  return { email: emailEntry.v, attributes, verified: verifyingKey !== undefined, policy };
}
