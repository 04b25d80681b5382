import { StreamUnsealer, type VerificationResult } from '../../lib/index.js';
import { PkgClient, memoryStore } from '../../lib/pkg/index.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { EMAIL } from './files.js';

/**
 * Our side of flow A until postguard-ts/client can open by uuid: the library's StreamUnsealer over
 * the storage's download, the PKG client for the verifying key and the recipient's key, and the
 * stand-in's wallet disclosing the recipient's address when the PKG client shows its session.
 */

export interface OpenedUpload {
  /** The plaintext (for files: the bundle's ZIP). */
  plaintext: Uint8Array;
  recipients: string[];
  result: VerificationResult;
}

/** Every wait on the network here ends within this. */
const TIMEOUT_MS = 60_000;

export async function openWithLibrary(
  services: { pkgUrl: string; storageUrl: string },
  uuid: string,
  recipient: string,
): Promise<OpenedUpload> {
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  const pkg = new PkgClient({ url: services.pkgUrl, store: memoryStore() });
  const response = await fetch(`${services.storageUrl}/filedownload/${uuid}`, { signal });
  if (response.status !== 200 || response.body === null) throw new Error(`download: HTTP ${response.status}`);
  const size = Number(response.headers.get('content-length'));
  const unsealer = await StreamUnsealer.new(response.body, await pkg.verificationKey({ signal }), { size });
  const policies = unsealer.inspect_header();
  const policy = policies.get(recipient);
  if (policy === undefined)
    throw new Error(`${recipient} is not among the recipients ${[...policies.keys()].join(', ')}`);
  let wallet: Promise<unknown> = Promise.resolve();
  const { usk } = await pkg.decryptionKey({
    recipientId: recipient,
    policy,
    signal,
    onSession: (session) => {
      wallet = disclose(session.pointer, { [EMAIL]: recipient }, { signal });
    },
  });
  await wallet;
  const parts: Uint8Array[] = [];
  const result = await unsealer.unseal(
    recipient,
    usk,
    new WritableStream({ write: (chunk) => void parts.push(chunk) }),
  );
  return { plaintext: Buffer.concat(parts), recipients: [...policies.keys()], result };
}
