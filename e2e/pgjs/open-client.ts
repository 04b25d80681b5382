import { PostGuard } from '../../client/index.js';
import type { IdentitySession } from '../../lib/pkg/index.js';
import type { SenderReport } from '../../lib/sender.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { EMAIL } from './files.js';

/**
 * Our side of flow A: postguard-ts/client's `open({ uuid })`, in Node, with the stand-in's wallet
 * disclosing the recipient's address when the client shows its session. The bundle is read twice:
 * file by file (`'entries'`: our ZIP reader on pg-js's ZIP, over ranged reads) and whole
 * (`'bytes'`: the sender's signatures checked to the last segment), the second with the key the
 * first cached, so one scan.
 */

export interface OpenedBundle {
  recipients: string[];
  /** inspect(): the sender the header claims. */
  claimed: SenderReport;
  /** 'entries': each file's bytes, by name, in the bundle's order. */
  entries: Map<string, Uint8Array>;
  /** 'bytes': the whole plaintext (the ZIP). */
  zip: Uint8Array;
  /** 'bytes': the sender, as far as the signatures proved. */
  sender: SenderReport;
  /** How many identity sessions the client showed. */
  sessions: number;
}

/** Every wait on the network here ends within this. */
const TIMEOUT_MS = 60_000;

export async function openWithClient(
  services: { pkgUrl: string; storageUrl: string },
  uuid: string,
  recipient: string,
): Promise<OpenedBundle> {
  // A wallet that fails aborts the decryption at once, instead of leaving it to wait out the session.
  const walletFailed = new AbortController();
  const signal = AbortSignal.any([walletFailed.signal, AbortSignal.timeout(TIMEOUT_MS)]);
  let sessions = 0;
  const onSession = (session: IdentitySession) => {
    sessions++;
    disclose(session.pointer, { [EMAIL]: recipient }, { signal }).catch((error: unknown) => walletFailed.abort(error));
  };
  const rethrowWallet = (error: unknown): never => {
    throw walletFailed.signal.aborted ? walletFailed.signal.reason : error;
  };

  const pg = new PostGuard({ pkgUrl: services.pkgUrl, cryptifyUrl: services.storageUrl, allowInsecureUrls: true });
  const opened = pg.open({ uuid, signal });
  const { recipients, sender: claimed } = await opened.inspect();
  const listed = await opened
    .decrypt({ recipient, output: 'entries', onSession, enableCache: true, signal })
    .catch(rethrowWallet);
  if (listed.output !== 'entries') throw new Error(`asked for entries, got ${listed.output}`);
  const entries = new Map<string, Uint8Array>();
  for (const entry of listed.entries) {
    entries.set(entry.name, new Uint8Array(await new Response(entry.stream()).arrayBuffer()));
  }
  const whole = await opened
    .decrypt({ recipient, output: 'bytes', onSession, enableCache: true, signal })
    .catch(rethrowWallet);
  if (whole.output !== 'bytes') throw new Error(`asked for bytes, got ${whole.output}`);
  return { recipients, claimed, entries, zip: whole.plaintext, sender: whole.sender, sessions };
}
