import { open } from 'node:fs/promises';
import { AuthenticationError, ErrorCode, FormatError, StreamUnsealer, type PostGuardError } from 'postguard-ts';
import { decodeHeader, decodeSignatureExt, readFrame, type FrameParts } from 'postguard-ts/format';
import type { Attribute, Policy } from 'postguard-ts';

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

/** The stored file's framing: its parts and, for the verifying path, its bytes. */
interface StoredFrame {
  parts: FrameParts;
  bytes: Uint8Array;
}

/** Reads only the framing (at most about 2 MiB, bounded by the format), never the payload. */
async function readStoredFrame(path: string): Promise<StoredFrame> {
  const file = await open(path, 'r');
  try {
    // The walk's reads follow one another from offset 0: together they are the framing's bytes.
    const chunks: Uint8Array[] = [];
    const read = async (position: number, length: number): Promise<Uint8Array> => {
      const buffer = new Uint8Array(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await file.read(buffer, filled, length - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      chunks.push(buffer.subarray(0, filled));
      return buffer.subarray(0, filled);
    };
    let parts: FrameParts;
    try {
      parts = await readFrame(read);
    } catch (error) {
      if (error instanceof FormatError && error.code === ErrorCode.TRUNCATED)
        throw new SenderError('the stored file ends inside the PostGuard header', { cause: error });
      throw error;
    }
    return { parts, bytes: Buffer.concat(chunks) };
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
async function publicIdentity(frame: StoredFrame, verifyingKey: string | undefined): Promise<Policy> {
  if (verifyingKey === undefined) {
    const header = decodeHeader(frame.parts.header);
    if (header.mode.type !== 'Streaming') throw new SenderError(IN_MEMORY);
    return decodeSignatureExt(frame.parts.signature).policy;
  }
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(frame.bytes);
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
    policy = await publicIdentity(await readStoredFrame(path), verifyingKey);
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
