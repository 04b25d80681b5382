import { fromBase64, toBase64 } from '../lib/base64.js';
import type { SecretBox } from '../lib/pkg/secret-box.js';
import type { ByteSource } from '../lib/net/sources.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { aborted } from './http.js';

/**
 * Where an unfinished upload survives a reload or a crash. Sealing draws fresh randomness, so
 * sealing the same file again gives other bytes: resuming an upload at the offset the storage
 * service confirmed needs the very bytes sent before. A keeper holds those bytes and the upload's
 * record (what the storage service said, what the finalize needs) until the upload is done.
 *
 * The rules every keeper follows (what is committed, what `list()` drops and when) live here, in
 * {@link keeperOver}; the places bytes and records are kept are backends: memory (below), the
 * browser's Origin Private File System or IndexedDB (keeper-browser.ts), a folder on disk
 * (`@postguard-ts/sdk`'s fileKeeper).
 */

/** One unfinished upload, as a keeper stores it. Plain JSON: no secret key is in it. */
export interface UploadRecord {
  /** Ours (random, {@link checkUploadId}'s alphabet), the key. */
  id: string;
  /** When the upload began (ms since the epoch). */
  createdAt: number;
  /** Ciphertext bytes. */
  size: number;
  /** Set once the storage's init answered. */
  uuid?: string;
  /** The storage service's recovery token for this upload. */
  recoveryToken?: string;
  /** The storage service's chunk size for this upload. */
  chunkSize?: number;
  /** X-PostGuard-Proof for finalize (not a secret key: bound to this upload's challenge). */
  proof?: string;
  /** The recipients' e-mail addresses or domains, as the user gave them. */
  recipients: string[];
  /** What the user sees, e.g. the file names. */
  label?: string;
  /**
   * SHA-256 (first 16 bytes, base64) of each 4 MiB piece of the kept bytes, as they were
   * written: a resume proves the kept bytes are the ones sealed before it sends anything. The
   * keeper fills it in when the record is saved.
   */
  digests?: string[];
  /** What finalize asks the storage service to send. */
  notify?: {
    /** Mail the recipients. */
    recipients?: boolean;
    /** Mail the sender a copy. */
    sender?: boolean;
    /** The message in those mails. */
    message?: string;
    /** The language of those mails. */
    language?: 'EN' | 'NL';
  };
  /**
   * Set while the bytes are being sealed (and sent as they are sealed): such an upload cannot be
   * resumed, as its bytes are committed only when sealing ends, when the record is saved again
   * without it. One still marked after its sealer went away (a reload, a crash) is a lost send.
   */
  sealing?: boolean;
}

/**
 * Keeps unfinished uploads: their sealed bytes and their records.
 *
 * Bytes are committed when the writable closes, atomically: until then `open` sees the earlier
 * bytes of that id or none, so a crash mid-write never leaves a short file that looks whole.
 * `list()` returns only uploads whose committed bytes are exactly `record.size`, and removes the
 * rest: at once when the bytes are there but of another size, after a grace period (default
 * {@link DEFAULT_GRACE_MS}) when they are missing, since another tab may still be writing them.
 * Bytes without a record are removed after the same grace.
 */
export interface UploadKeeper {
  /** Whether what is kept survives a reload (false: memory only). */
  readonly persistent: boolean;
  /** The sealed bytes, written once, in order; visible once closed; abort() removes them. */
  create(id: string): Promise<WritableStream<Uint8Array>>;
  /** The committed bytes of `id`, read by spans; undefined when there are none. */
  open(id: string): Promise<ByteSource | undefined>;
  /** Stores a record, replacing the one of the same id. */
  save(record: UploadRecord): Promise<void>;
  /**
   * The resumable uploads, oldest first; records whose bytes are missing or short are dropped
   * (silently removed). With `sealing: true`, the records still marked {@link UploadRecord.sealing}
   * instead, whatever their bytes (a keeper that predates the mark may give none).
   */
  list(options?: ListOptions): Promise<UploadRecord[]>;
  /** Removes the record and the bytes of `id`. */
  remove(id: string): Promise<void>;
  /**
   * Remembers that upload `id` was sent (the storage service answered its finalize) as `uuid`;
   * called before its record is removed. Only keepers that can (the SDK's fileKeeper) have it:
   * they make a keyed upload (`UploadOptions.key`) safe to run again.
   */
  markSent?(id: string, uuid: string): Promise<void>;
  /** The storage service's uuid of upload `id`, if {@link markSent} recorded it. */
  sentAs?(id: string): Promise<string | undefined>;
}

/** What {@link UploadKeeper.list} lists. */
export interface ListOptions {
  /** The records of uploads being sealed (or whose sealer went away), not the resumable ones. Default false. */
  sealing?: boolean;
}

/** Committed bytes as a backend lists them. */
export interface KeptBytes {
  /** The upload id. */
  id: string;
  /** Bytes committed. */
  size: number;
  /** When they were committed (ms since the epoch). */
  modifiedAt: number;
}

/**
 * A place to keep bytes and records, without the rules: {@link keeperOver} adds them (ids and
 * records checked, spans and signals handled, failures typed, the sweep of `list()`).
 */
export interface KeeperBackend {
  /** Whether what is kept survives a reload. */
  readonly persistent: boolean;
  /**
   * A writer of `id`'s bytes. Closing commits them, atomically replacing earlier ones; aborting
   * leaves no bytes of `id` at all. Chunks arrive checked (Uint8Array); the backend may keep them
   * only until its write resolves unless it copies them.
   */
  createBytes(id: string): Promise<WritableStream<Uint8Array>>;
  /** The committed bytes of `id`, or undefined. Reads are checked and bounded by the keeper. */
  openBytes(id: string): Promise<ByteSource | undefined>;
  /** Every id with committed bytes (size 0 counts as none: an engine may show a file mid-write so). */
  listBytes(): Promise<KeptBytes[]>;
  /** Removes `id`'s committed bytes, if any. */
  removeBytes(id: string): Promise<void>;
  /** Stores a (checked) record under its id. */
  saveRecord(record: UploadRecord): Promise<void>;
  /** Every stored record, unchecked, with the key it is stored under. */
  listRecords(): Promise<Array<{ id: string; value: unknown }>>;
  /** Removes the record stored under `id`, if any. */
  removeRecord(id: string): Promise<void>;
  /** Removes leftovers of writes that never committed, last touched before `before` (ms). */
  sweep?(before: number): Promise<void>;
  /** Stores that `id` was sent as `uuid` ({@link UploadKeeper.markSent}); kept until the place is cleared. */
  saveSent?(id: string, uuid: string): Promise<void>;
  /** What {@link saveSent} stored for `id`, or undefined. */
  loadSent?(id: string): Promise<string | undefined>;
  /**
   * Seals the recovery token before a record is stored, and opens it when records are listed
   * (browsers: the device's non-extractable key); without one the token is stored as given.
   */
  secrets?: SecretBox;
}

const SEALED_TOKEN = 'pg-sealed:1:';

/** `token` sealed under `box`, bound to the upload, as a string a record can carry. */
/** What a sealed token is bound to: the upload, its size and its digests (an edited record does not open). */
const tokenContext = (r: UploadRecord) => `upload|${r.id}|${r.size}|${(r.digests ?? []).join(',')}`;

async function sealToken(box: SecretBox, record: UploadRecord, token: string): Promise<string> {
  const { iv, data } = await box.seal(token, tokenContext(record));
  return `${SEALED_TOKEN}${toBase64(iv)}.${toBase64(data)}`;
}

/** The token `stored` seals, or undefined when it cannot be opened (not sealed, moved, the key gone). */
async function openToken(box: SecretBox, record: UploadRecord, stored: string): Promise<string | undefined> {
  if (!stored.startsWith(SEALED_TOKEN)) return undefined;
  const [iv, data] = stored.slice(SEALED_TOKEN.length).split('.');
  try {
    return await box.open({ v: 1, iv: fromBase64(iv, 'iv'), data: fromBase64(data, 'data') }, tokenContext(record));
  } catch {
    return undefined;
  }
}

/** Options of every keeper. */
export interface KeeperOptions {
  /**
   * How long missing bytes may still be on their way (another tab sealing), and unrecorded bytes
   * may still get their record, before `list()` removes them. Default {@link DEFAULT_GRACE_MS}.
   */
  graceMs?: number;
}

/** A day: longer than any sealing takes, short enough that a crash does not hold disk for long. */
export const DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000;

/** Bytes per digest of the kept bytes (`UploadRecord.digests`): 256 digests for a GiB. */
export const DIGEST_PIECE = 4 * 1024 * 1024;

/** The digest of one piece of kept bytes, as a record carries it. */
export async function pieceDigest(bytes: Uint8Array): Promise<string> {
  const hash = await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return toBase64(new Uint8Array(hash, 0, 16));
}

/** Generous for labels and messages, small enough that listing never reads much. */
export const MAX_RECORD_BYTES = 256 * 1024;

const ID = /^[\w-]{1,128}$/;

/**
 * `id` if it can name an upload: 1 to 128 of `A–Z a–z 0–9 _ -`, since keepers use it as a file
 * name (no separators, no dots). Anything else is INVALID_INPUT.
 */
export function checkUploadId(id: unknown): string {
  if (typeof id !== 'string' || !ID.test(id))
    throw invalidInput('an upload id is 1 to 128 letters, digits, "_" or "-"');
  return id;
}

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
const isText = (s: unknown): s is string => typeof s === 'string';

/**
 * A clean copy of `value` if it is an {@link UploadRecord} (known fields only, each of its type,
 * at most {@link MAX_RECORD_BYTES} as JSON), else INVALID_INPUT naming the field.
 */
export function checkUploadRecord(value: unknown): UploadRecord {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw invalidInput('an upload record must be an object');
  const v = value as Record<string, unknown>;
  const bad = (field: string, rule: string) => invalidInput(`upload record: ${field} must be ${rule}`);
  const record: UploadRecord = {
    id: checkUploadId(v.id),
    createdAt: isCount(v.createdAt) ? v.createdAt : fail(bad('createdAt', 'a time in ms')),
    size: isCount(v.size) && v.size > 0 ? v.size : fail(bad('size', 'a positive whole number of bytes')),
    recipients:
      Array.isArray(v.recipients) && v.recipients.every(isText)
        ? [...(v.recipients as string[])]
        : fail(bad('recipients', 'an array of strings')),
  };
  for (const field of ['uuid', 'recoveryToken', 'proof', 'label'] as const) {
    if (v[field] === undefined) continue;
    if (!isText(v[field])) throw bad(field, 'a string');
    record[field] = v[field];
  }
  if (v.sealing !== undefined) {
    if (typeof v.sealing !== 'boolean') throw bad('sealing', 'a boolean');
    if (v.sealing) record.sealing = true;
  }
  if (v.chunkSize !== undefined) {
    if (!isCount(v.chunkSize) || v.chunkSize === 0) throw bad('chunkSize', 'a positive whole number');
    record.chunkSize = v.chunkSize;
  }
  if (v.notify !== undefined) record.notify = checkNotify(v.notify, bad);
  if (v.digests !== undefined) {
    const pieces = Math.ceil(record.size / DIGEST_PIECE);
    if (
      !Array.isArray(v.digests) ||
      v.digests.length !== pieces ||
      !v.digests.every((d) => isText(d) && d.length === 24)
    )
      throw bad(
        'digests',
        `${pieces} digests of ${DIGEST_PIECE} bytes each, one per piece of the ${record.size} bytes`,
      );
    record.digests = [...(v.digests as string[])];
  }
  if (new TextEncoder().encode(JSON.stringify(record)).length > MAX_RECORD_BYTES)
    throw invalidInput(`an upload record is at most ${MAX_RECORD_BYTES} bytes as JSON`);
  return record;
}

function checkNotify(
  value: unknown,
  bad: (field: string, rule: string) => ClientError,
): NonNullable<UploadRecord['notify']> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad('notify', 'an object');
  const n = value as Record<string, unknown>;
  const out: NonNullable<UploadRecord['notify']> = {};
  for (const flag of ['recipients', 'sender'] as const) {
    if (n[flag] === undefined) continue;
    if (typeof n[flag] !== 'boolean') throw bad(`notify.${flag}`, 'a boolean');
    out[flag] = n[flag];
  }
  if (n.message !== undefined) out.message = isText(n.message) ? n.message : fail(bad('notify.message', 'a string'));
  if (n.language !== undefined)
    out.language =
      n.language === 'EN' || n.language === 'NL' ? n.language : fail(bad('notify.language', "'EN' or 'NL'"));
  return out;
}

function fail(error: ClientError): never {
  throw error;
}

/**
 * A failure of the place uploads are kept (quota, disk, a file changed underneath): INPUT_FAILED,
 * as the kept bytes are the upload's input.
 */
export function keeperFailed(what: string, cause: unknown): ClientError {
  if (cause instanceof ClientError) return cause;
  const reason =
    cause instanceof Error ? cause.message : cause == null ? 'the browser or the system gave no reason' : String(cause);
  return new ClientError(ClientErrorCode.INPUT_FAILED, `the kept upload could not be ${what}: ${reason}`, {
    cause,
  });
}

async function guarded<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (cause) {
    throw keeperFailed(what, cause);
  }
}

/** `promise`, or ABORTED as soon as `signal` fires (a local read has no other way to be cut short). */
function raced<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(aborted(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** `source` with its spans checked, its reads abortable and its failures typed. */
function checkedSource(id: string, source: ByteSource): ByteSource {
  const { size } = source;
  return {
    size,
    async read(offset, length, signal) {
      if (!isCount(offset) || !isCount(length) || offset + length > size)
        throw invalidInput(`bytes ${offset}+${length} are not within the ${size} kept bytes of upload ${id}`);
      if (signal?.aborted) throw aborted(signal.reason);
      const bytes = await raced(
        guarded('read', () => source.read(offset, length, signal)),
        signal,
      );
      if (!(bytes instanceof Uint8Array) || bytes.length !== length)
        throw keeperFailed('read', new Error(`${length} bytes asked at ${offset}, another count came: it changed`));
      return bytes;
    },
  };
}

/**
 * The backend's writer behind one that checks chunks, types failures, and digests the bytes by
 * {@link DIGEST_PIECE} (one piece held, copied) for `committed` once they are committed.
 */
function checkedWriter(
  inner: WritableStream<Uint8Array>,
  committed: (digests: string[]) => void,
): WritableStream<Uint8Array> {
  const writer = inner.getWriter();
  const digests: string[] = [];
  let piece: Uint8Array | undefined;
  let filled = 0;
  const digest = async () => {
    if (filled === 0) return;
    digests.push(await pieceDigest(piece!.subarray(0, filled)));
    filled = 0;
  };
  return new WritableStream<Uint8Array>({
    async write(chunk) {
      if (!(chunk instanceof Uint8Array)) {
        await writer.abort().catch(() => undefined);
        throw invalidInput('sealed bytes are written as Uint8Array chunks');
      }
      for (let at = 0; at < chunk.length;) {
        piece ??= new Uint8Array(DIGEST_PIECE);
        const take = Math.min(DIGEST_PIECE - filled, chunk.length - at);
        piece.set(chunk.subarray(at, at + take), filled);
        filled += take;
        at += take;
        if (filled === DIGEST_PIECE) await digest();
      }
      await guarded('written', () => writer.write(chunk));
    },
    async close() {
      await digest();
      piece = undefined;
      await guarded('committed', () => writer.close());
      committed(digests);
    },
    abort: (reason) => {
      piece = undefined;
      return guarded('removed', () => writer.abort(reason));
    },
  });
}

/**
 * Whether `source` holds the bytes `record.digests` describe, every piece read and hashed: the
 * size first (a truncated file with its record's size edited has the wrong number of digests,
 * refused when the record is read), then each piece. KEPT_BYTES_CHANGED otherwise; nothing sent.
 */
export async function verifyKeptBytes(record: UploadRecord, source: ByteSource, signal?: AbortSignal): Promise<void> {
  const changed = (why: string) =>
    new ClientError(
      ClientErrorCode.KEPT_BYTES_CHANGED,
      `the kept bytes of this upload are not the ones sealed (${why}): nothing was sent, and it cannot be resumed`,
      record.uuid === undefined ? {} : { uuid: record.uuid },
    );
  const { digests } = record;
  if (digests === undefined) throw changed('the record has no digests to check them against');
  if (source.size !== record.size) throw changed(`${source.size} bytes kept, ${record.size} sealed`);
  if (digests.length !== Math.ceil(record.size / DIGEST_PIECE)) throw changed('the record does not fit its size');
  for (let n = 0; n < digests.length; n++) {
    const offset = n * DIGEST_PIECE;
    const bytes = await source.read(offset, Math.min(DIGEST_PIECE, record.size - offset), signal);
    if ((await pieceDigest(bytes)) !== digests[n]) throw changed(`bytes ${offset} to ${offset + bytes.length} differ`);
  }
}

/**
 * What `list()` does with one record, given its committed bytes. A record still sealing is never
 * resumable ('sealing'), until the grace is over: then it goes, whatever its bytes.
 */
function verdict(
  record: UploadRecord,
  bytes: KeptBytes | undefined,
  before: number,
): 'keep' | 'hide' | 'remove' | 'sealing' {
  if (record.sealing === true) return record.createdAt < before ? 'remove' : 'sealing';
  if (bytes === undefined) return record.createdAt < before ? 'remove' : 'hide';
  return bytes.size === record.size ? 'keep' : 'remove';
}

/** A keeper over `backend`, with the rules {@link UploadKeeper} states. */
export function keeperOver(backend: KeeperBackend, options: KeeperOptions = {}): UploadKeeper {
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
  if (!isCount(graceMs)) throw invalidInput('graceMs must be a whole number of ms, 0 or more');
  /** Digests of bytes committed in this keeper's life, for the record saved next (sealed.ts saves it after). */
  const written = new Map<string, string[]>();
  const removeBoth = (id: string) =>
    guarded('removed', async () => {
      await backend.removeRecord(id);
      await backend.removeBytes(id);
    });
  const { saveSent, loadSent } = backend;
  const sent: Pick<UploadKeeper, 'markSent' | 'sentAs'> =
    saveSent === undefined || loadSent === undefined
      ? {}
      : {
          markSent: (id, uuid) => guarded('marked as sent', () => saveSent.call(backend, checkUploadId(id), uuid)),
          sentAs: (id) => guarded('read', () => loadSent.call(backend, checkUploadId(id))),
        };
  return {
    ...sent,
    persistent: backend.persistent,
    create: async (id) => {
      const inner = await guarded('created', () => backend.createBytes(checkUploadId(id)));
      written.delete(id);
      return checkedWriter(inner, (digests) => written.set(id, digests));
    },
    open: async (id) => {
      checkUploadId(id);
      const source = await guarded('opened', () => backend.openBytes(id));
      return source === undefined ? undefined : checkedSource(id, source);
    },
    save: async (record) => {
      const digests = written.get(record?.id);
      const clean = checkUploadRecord(
        digests !== undefined && record?.digests === undefined ? { ...record, digests } : record,
      );
      const box = backend.secrets;
      if (box !== undefined && clean.recoveryToken !== undefined) {
        const token = clean.recoveryToken;
        clean.recoveryToken = await guarded('sealed', () => sealToken(box, clean, token));
      }
      await guarded('saved', () => backend.saveRecord(clean));
    },
    remove: async (id) => {
      written.delete(id);
      await removeBoth(checkUploadId(id));
    },
    list: async (options = {}) => {
      const wantSealing = options.sealing === true;
      const before = Date.now() - graceMs;
      const [stored, kept] = await guarded('listed', () => Promise.all([backend.listRecords(), backend.listBytes()]));
      const bytes = new Map(kept.map((b) => [b.id, b]));
      const records: UploadRecord[] = [];
      for (const { id, value } of stored) {
        let record: UploadRecord | undefined;
        try {
          record = checkUploadRecord(value);
        } catch {
          // damaged or from another version: unusable, whatever its bytes
        }
        if (record?.recoveryToken !== undefined && backend.secrets !== undefined) {
          // A token in the clear (or one its key no longer opens) is not resumed, and not kept.
          const token = await openToken(backend.secrets, record, record.recoveryToken);
          if (token === undefined) record = undefined;
          else record.recoveryToken = token;
        }
        const fate = record === undefined || record.id !== id ? 'remove' : verdict(record, bytes.get(id), before);
        if (fate === (wantSealing ? 'sealing' : 'keep')) records.push(record!);
        if (fate === 'remove') {
          await guarded('removed', () => backend.removeRecord(id));
          if (ID.test(id)) await guarded('removed', () => backend.removeBytes(id));
        }
        bytes.delete(id);
      }
      for (const orphan of bytes.values())
        if (orphan.modifiedAt < before) await guarded('removed', () => backend.removeBytes(orphan.id));
      if (backend.sweep) await guarded('swept', () => backend.sweep!(before));
      return records.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    },
  };
}

/** Bytes kept in memory as the pieces written, each copied; records as clones. */
export function memoryBackend(): KeeperBackend {
  const committed = new Map<string, { pieces: Uint8Array[]; ends: number[]; modifiedAt: number }>();
  const records = new Map<string, UploadRecord>();
  return {
    persistent: false,
    createBytes: async (id) => {
      const pieces: Uint8Array[] = [];
      const ends: number[] = [];
      let size = 0;
      return new WritableStream<Uint8Array>({
        write(chunk) {
          if (chunk.length === 0) return;
          pieces.push(chunk.slice());
          ends.push((size += chunk.length));
        },
        close() {
          committed.set(id, { pieces, ends, modifiedAt: Date.now() });
        },
        abort() {
          committed.delete(id);
        },
      });
    },
    openBytes: async (id) => {
      const kept = committed.get(id);
      if (kept === undefined) return undefined;
      const { pieces, ends } = kept;
      return {
        size: ends.at(-1) ?? 0,
        read: async (offset, length) => copySpan(pieces, ends, offset, length),
      };
    },
    listBytes: async () =>
      [...committed]
        .filter(([, k]) => k.ends.length > 0)
        .map(([id, k]) => ({ id, size: k.ends.at(-1)!, modifiedAt: k.modifiedAt })),
    removeBytes: async (id) => void committed.delete(id),
    saveRecord: async (record) => void records.set(record.id, structuredClone(record)),
    listRecords: async () => [...records].map(([id, value]) => ({ id, value: structuredClone(value) })),
    removeRecord: async (id) => void records.delete(id),
  };
}

/** `length` bytes from `offset` of pieces ending at `ends` (ascending): binary search, then copy. */
function copySpan(pieces: readonly Uint8Array[], ends: readonly number[], offset: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  let lo = 0;
  let hi = ends.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ends[mid]! <= offset) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo, filled = 0; filled < length; i++) {
    const piece = pieces[i]!;
    const start = offset + filled - (ends[i]! - piece.length);
    const part = piece.subarray(start, start + length - filled);
    out.set(part, filled);
    filled += part.length;
  }
  return out;
}

/**
 * A keeper in memory: a reload or a crash forgets everything (`persistent` false). For Node
 * scripts that need no resume across runs, for tests, and where the browser keeps nothing.
 */
export function memoryKeeper(options: KeeperOptions = {}): UploadKeeper {
  return keeperOver(memoryBackend(), options);
}

/** The Web Lock a page holds while it seals upload `id` (what tells a live sealer from one a reload ended). */
const sealingLock = (id: string) => `postguard-sealing:${id}`;

type Locks = {
  request<T>(name: string, options: { ifAvailable?: boolean }, work: (lock: unknown) => Promise<T> | T): Promise<T>;
};
const webLocks = (): Locks | undefined =>
  (globalThis as { navigator?: { locks?: Locks } }).navigator?.locks ?? undefined;

/**
 * Takes the lock that says upload `id` is being sealed here, and resolves once it is held, with
 * the function that releases it. Without Web Locks (Node) there is no lock and the release does
 * nothing: {@link sealerGone} then never says a sealer is gone.
 */
export async function holdSealingLock(id: string): Promise<() => void> {
  const locks = webLocks();
  if (locks === undefined) return () => undefined;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await new Promise<void>((held, failed) => {
    locks.request(sealingLock(id), {}, () => (held(), released)).catch(failed);
  });
  return release;
}

/**
 * Whether nobody seals upload `id` any more: true only where Web Locks tell (its lock is free, so
 * the page that sealed it was reloaded or closed); false where nothing can tell.
 */
export async function sealerGone(id: string): Promise<boolean> {
  const locks = webLocks();
  if (locks === undefined) return false;
  return locks.request(sealingLock(id), { ifAvailable: true }, (lock) => lock !== null);
}
