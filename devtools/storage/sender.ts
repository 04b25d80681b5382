import { open } from 'node:fs/promises';
import { AuthenticationError, ErrorCode, FormatError, StreamUnsealer, type PostGuardError } from 'postguard-ts';
import { PREAMBLE_BYTES, decodeHeader, parsePreamble, parseSignatureLength } from 'postguard-ts/format';
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

/**
 * The stored bytes cannot name a sender: not a streaming PostGuard ciphertext, a header whose
 * signature does not verify under the PKG's key, or a sender without the e-mail attribute. The
 * uploader's fault, not the service's (an I/O failure is a plain Error).
 */
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

const IN_MEMORY = 'the upload is an in-memory PostGuard file; uploads must be sealed as a stream';

/** What the library's refusal means for an upload, in the uploader's terms. */
function explain(error: PostGuardError): string {
  if (error.code === ErrorCode.WRONG_MODE) return IN_MEMORY;
  if (error.code === ErrorCode.BAD_SIGNATURE)
    return "the PostGuard header's signature does not verify under this service's PKG verifying key";
  return `the upload is not a readable PostGuard file (${error.code}): ${error.message}`;
}

/** Uploads are made by streaming clients; an in-memory file is refused with or without a key, as the keyed path does. */
async function publicIdentity(frame: Uint8Array, verifyingKey: string | undefined): Promise<Policy> {
  if (verifyingKey === undefined) {
    const headerLength = parsePreamble(frame.subarray(0, PREAMBLE_BYTES));
    const header = decodeHeader(frame.subarray(PREAMBLE_BYTES, PREAMBLE_BYTES + headerLength));
    if (header.mode.type !== 'Streaming') throw new SenderError(IN_MEMORY);
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
  let policy: Policy;
  try {
    policy = await publicIdentity(await readFrame(path), verifyingKey);
  } catch (error) {
    // Format and authentication errors are about the uploaded bytes (framing, mode, signature);
    // anything else (I/O, a verifying key the library refuses) is the service's own failure.
    if (error instanceof FormatError || error instanceof AuthenticationError) {
      throw new SenderError(explain(error), { cause: error });
    }
    throw error;
  }
  const con = policy.con;
  const emailEntry = con.find((a) => a.t === emailAttribute);
  if (emailEntry === undefined) throw new SenderError(`the sender identity has no ${emailAttribute} attribute`);
  const attributes = con
    .filter((a): a is Required<Attribute> => a.t !== emailAttribute && typeof a.v === 'string')
    .map((a): [string, string] => [a.t, a.v]);
  return { email: emailEntry.v, attributes, verified: verifyingKey !== undefined, policy };
}
