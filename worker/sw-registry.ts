import { isCandidateList } from '../lib/key-candidates.js';
import { ErrorCode, PostGuardError } from '../lib/errors.js';
import type { RandomAccessFile } from '../lib/random-access.js';
import { encodeError } from './errors.js';
import { safeFilename } from './sw-headers.js';
import type { DownloadEvent, RegisterReply, RegisterRequest, WireSource } from './sw-protocol.js';
import type { DecrypterSettings } from './sw-settings.js';
import { cancelWireSource, rereadable } from './sw-source.js';

/**
 * The downloads a decrypter knows: registered by pages, kept in memory only (keys never touch
 * storage), single-use and expiring. A seekable one (a Blob or URL source registered with
 * `seekable`) answers any number of requests until it has gone unrequested for its lifetime (a
 * video that plays or seeks keeps it; one left alone lets its keys go).
 */

export interface Registration {
  readonly id: string;
  readonly request: RegisterRequest;
  /** The page's port: every event of this download goes there. */
  readonly reply: MessagePort;
  /** Answers Range requests and many requests (a Blob or URL source registered with `seekable`). */
  readonly seekable: boolean;
  /** A seekable registration's file, opened by its first range request and kept for the others; undefined inside: the source cannot seek. */
  file?: Promise<RandomAccessFile | undefined>;
  /** Aborted when the registration ends: stops its responses and source reads. */
  readonly abort: AbortController;
}

interface Entry extends Registration {
  timer: ReturnType<typeof setTimeout>;
  /** A seekable registration's lifetime starts again. */
  renew?: () => void;
}

/** Tells a page something; a page that has gone hears nothing. */
export function post(port: MessagePort, message: DownloadEvent): void {
  try {
    port.postMessage(message);
  } catch {
    // the page is gone
  }
}

const randomId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=/g, ''); // padding, only ever at the end
};

const MEDIA_TYPE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(?:\s*;\s*[\w!#$&^.+-]+=(?:[\w!#$&^.+-]+|"[^"\\\r\n]*"))*$/;

function isKeyOrCandidates(v: unknown): boolean {
  if (typeof v === 'string') return true;
  try {
    return isCandidateList(v);
  } catch {
    return false; // an empty list or a malformed candidate
  }
}

/** Checks a registration from a page; returns the reason it is unusable, or undefined. */
function invalidRequest(r: RegisterRequest): string | undefined {
  if (typeof r !== 'object' || r === null) return 'the request must be an object';
  if (typeof r.recipientId !== 'string') return 'recipientId must be a string';
  if (!isKeyOrCandidates(r.usk) || !isKeyOrCandidates(r.vk))
    return 'usk and vk must be base64 strings or lists of { id, key }';
  if (r.contentType !== undefined && (typeof r.contentType !== 'string' || !MEDIA_TYPE.test(r.contentType)))
    return 'contentType is not a media type';
  if (r.disposition !== undefined && r.disposition !== 'attachment' && r.disposition !== 'inline')
    return 'disposition must be attachment or inline';
  if (r.verifyFirst !== undefined && typeof r.verifyFirst !== 'boolean') return 'verifyFirst must be a boolean';
  if (r.paced !== undefined && typeof r.paced !== 'boolean') return 'paced must be a boolean';
  if (r.seekable !== undefined && typeof r.seekable !== 'boolean') return 'seekable must be a boolean';
  // Pacing follows one reader through one body; a seekable URL is read by a media element, in ranges.
  if (r.seekable === true && r.paced === true) return 'a download cannot be both seekable and paced';
  if (r.size !== undefined && (!Number.isSafeInteger(r.size) || r.size < 0))
    return 'size must be a non-negative integer';
  if (r.decrypter !== undefined && !(r.decrypter instanceof MessagePort)) return 'decrypter is not a MessagePort';
  const s = r.source as WireSource | undefined;
  if (typeof s !== 'object' || s === null) return 'source is missing';
  if (s.kind === 'url') {
    try {
      const url = new URL(s.url);
      if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'source url must be http(s)';
    } catch {
      return 'source url is not a URL';
    }
  } else if (s.kind === 'blob') {
    if (!(s.blob instanceof Blob)) return 'source blob is not a Blob';
  } else if (s.kind === 'stream') {
    if (!(s.stream instanceof ReadableStream)) return 'source stream is not a ReadableStream';
  } else if (s.kind === 'relay') {
    if (!(s.port instanceof MessagePort)) return 'source port is not a MessagePort';
  } else {
    return 'unknown source kind';
  }
  return undefined;
}

export class DownloadRegistry {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly settings: DecrypterSettings,
    /** The service worker's scope URL: download URLs live under it. */
    private readonly scopeUrl: string,
  ) {}

  /** Registers a page's download and answers it on `reply`: the URL, or why not. */
  register(request: RegisterRequest, reply: MessagePort): void {
    const refuse = (code: ErrorCode, message: string) =>
      post(reply, {
        type: 'registered',
        ok: false,
        error: encodeError(new PostGuardError(code, message)),
      } satisfies RegisterReply);
    const invalid = invalidRequest(request);
    if (invalid !== undefined) return refuse(ErrorCode.INVALID_INPUT, invalid);
    const { maxRegistrations, maxTtlMs, seekableTtlMs, defaultTtlMs, path } = this.settings;
    if (this.entries.size >= maxRegistrations)
      return refuse(ErrorCode.INVALID_STATE, `more than ${maxRegistrations} downloads are waiting`);
    // A stream can be read once: registered seekable, it is still served once, whole.
    const seekable = request.seekable === true && rereadable(request.source);
    const ttl = Math.min(maxTtlMs, Math.max(1, request.ttlMs ?? (seekable ? seekableTtlMs : defaultTtlMs)));
    const id = randomId();
    const expire = () => {
      const entry = this.entries.get(id);
      if (entry === undefined) return;
      this.end(
        entry,
        new PostGuardError(
          ErrorCode.INVALID_STATE,
          seekable
            ? 'the seekable download reached the end of its lifetime'
            : 'the download expired before it was fetched',
        ),
      );
      void cancelWireSource(entry.request.source);
    };
    const entry: Entry = { id, request, reply, timer: setTimeout(expire, ttl), seekable, abort: new AbortController() };
    if (seekable) {
      entry.renew = () => {
        clearTimeout(entry.timer);
        entry.timer = setTimeout(expire, ttl);
        // The page bounds the registration's life by the same lifetime (download.ts): it hears of the renewal.
        post(reply, { type: 'alive' });
      };
    }
    this.entries.set(id, entry);
    const url = new URL(`${path}${id}/${encodeURIComponent(safeFilename(request.filename))}`, this.scopeUrl).href;
    post(reply, { type: 'registered', ok: true, id, url, seekable } satisfies RegisterReply);
  }

  /** The registration a HEAD asks about (a seekable one lives on, renewed). */
  peek(id: string): Registration | undefined {
    const entry = this.entries.get(id);
    entry?.renew?.();
    return entry;
  }

  /**
   * The registration a GET asks for. Single use: whatever happens next, a one-shot id is spent; a
   * seekable one lives on until its lifetime ends, renewed by each request.
   */
  claim(id: string): Registration | undefined {
    const found = this.entries.get(id);
    const entry = found?.seekable === true ? found : this.drop(id);
    entry?.renew?.();
    if (entry !== undefined && !entry.seekable) this.answer(entry);
    return entry;
  }

  /**
   * Keeps a one-shot download that is being answered within reach of its page's revoke (what its
   * caller's abort sends), from the first byte of the source on: until it ends, or for the longest
   * a fetch event lives.
   */
  private answer(entry: Registration): void {
    const forget = () => {
      clearTimeout(timer);
      if (this.answering.get(entry.id) === entry) this.answering.delete(entry.id);
    };
    const timer = setTimeout(forget, this.settings.maxEventMs);
    entry.abort.signal.addEventListener('abort', forget, { once: true });
    this.answering.set(entry.id, entry);
  }

  /** The page no longer wants it: it ends, and its source is let go. */
  revoke(id: string): void {
    const answering = this.answering.get(id);
    // Being answered: its response ends and tells the page why (sw-whole.ts), its source let go.
    if (answering !== undefined)
      answering.abort.abort(new PostGuardError(ErrorCode.CANCELLED, 'the download was revoked'));
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.end(entry, new PostGuardError(ErrorCode.INVALID_STATE, 'the download was revoked'));
    void cancelWireSource(entry.request.source);
  }

  /** Ends a registration with an error its page hears (once): it answers nothing more. */
  end(entry: Registration, error: unknown): void {
    if (this.drop(entry.id) === undefined) return;
    post(entry.reply, { type: 'error', error: encodeError(error) });
    entry.abort.abort(error);
  }

  /** One-shot downloads claimed and being answered, by id. */
  private readonly answering = new Map<string, Registration>();

  private drop(id: string): Entry | undefined {
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    this.entries.delete(id);
    clearTimeout(entry.timer);
    return entry;
  }
}
