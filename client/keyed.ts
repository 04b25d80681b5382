import { invalidInput } from './errors.js';
import type { UploadKeeper, UploadRecord } from './keeper.js';

/**
 * Uploads keyed by the caller (`UploadOptions.key`: a batch id, or a digest of the files and the
 * recipients), so that a script run again after a crash sends each upload once. The key names a
 * keeper id (below); the keeper remembers what it sent under that id (`UploadKeeper.markSent`,
 * written before the upload's record is removed), so every point a crash can hit has one outcome:
 *
 *   before the record is saved          nothing kept, nothing finalized: sealed and sent afresh
 *   while sealing (record `sealing`)    never finalized, nobody mailed: removed, sent afresh
 *   mid-upload, or after finalize       the record and its bytes are kept: resumed (a finalize the
 *     before the record was cleared     storage service already had answers again and mails no one)
 *   after the sent mark                 answered from the mark: nothing is sent
 */

/** The longest key taken (a key is hashed, so its length costs nothing else). */
export const MAX_UPLOAD_KEY_LENGTH = 1024;

const KEYED_PREFIX = 'key-';

/** The keeper id of the upload keyed `key`: a digest, so any text can be a key and none names a file. */
export async function keyedUploadId(key: unknown): Promise<string> {
  if (typeof key !== 'string' || key === '' || key.length > MAX_UPLOAD_KEY_LENGTH)
    throw invalidInput(`key: a non-empty string of at most ${MAX_UPLOAD_KEY_LENGTH} characters`);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
  return `${KEYED_PREFIX}${Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** Whether a keeper id is a keyed upload's (random ids are hex, so never start so). */
export const isKeyedUploadId = (id: string): boolean => id.startsWith(KEYED_PREFIX);

/** Where the upload of keeper id `id` stands: sent (its uuid), kept unfinished (its record), or not begun. */
export type KeyedState = { sent: string } | { kept: UploadRecord } | { fresh: true };

/**
 * Where the keyed upload `id` stands in `keeper`. A send cut off while it was sealed was never
 * finalized (nobody was mailed) and cannot be resumed: its leftovers are removed and it starts
 * afresh. A keeper that cannot remember sent uploads is INVALID_INPUT: the key would promise what
 * it cannot keep.
 */
export async function keyedState(keeper: UploadKeeper, id: string): Promise<KeyedState> {
  if (!keeper.persistent || keeper.sentAs === undefined)
    throw invalidInput("key: needs a keeper that remembers sent uploads (the SDK's fileKeeper)");
  const sent = await keeper.sentAs(id);
  if (sent !== undefined) return { sent };
  const kept = (await keeper.list()).find((r) => r.id === id);
  if (kept !== undefined) return { kept };
  if ((await keeper.list({ sealing: true })).some((r) => r.id === id)) await keeper.remove(id);
  return { fresh: true };
}
