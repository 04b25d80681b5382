import type { ResolvedConfig } from './config.js';
import { isBrowser } from './host.js';
import { ClientError, ClientErrorCode, invalidInput, type ClientErrorDetails } from './errors.js';
import { backoff, discard, exchange, excerpt, isTransientStatus, readJson } from './http.js';

/**
 * The Cryptify upload protocol, client side, as Cryptify implements it:
 *
 *   GET  /limits                     → {per_upload_limit_bytes, rolling_limit_bytes, window_days}
 *                                      (the default tier's; an older Cryptify answers 404)
 *   POST /fileupload/init            → {uuid, recovery_token, challenge, max_chunk_size_bytes},
 *                                      header cryptifytoken
 *   PUT  /fileupload/{uuid}          Content-Range: bytes <offset>-<offset + length>/*   (end EXCLUSIVE)
 *                                    cryptifytoken: <current>  → header cryptifytoken: <next>
 *   POST /fileupload/finalize/{uuid} Content-Range: bytes * / <total>  (written without the spaces)
 *   GET  /fileupload/{uuid}/status   X-Recovery-Token → {uploaded, cryptify_token, prev_token?, prev_offset?}
 *
 * Retries. A chunk PUT is sent again, on every attempt, with the token the chunk was first sent
 * with: Cryptify keeps the last committed chunk's start and the token it came with, and a PUT of
 * that start with that token and the same bytes is answered with the same next token, nothing
 * written twice. So after an answer that was lost (the chunk committed, the server's token moved
 * on), the retry takes that replay path; after a failure before the commit, it is simply the next
 * chunk. Any other token is refused with a 400 either way: the server's new token (which the client
 * never saw) at the old offset, and also the token of the chunk *before* (what pg-js 2.x resends
 * from its second attempt on, which works only for an upload's first chunk). The GETs are retried
 * as they change nothing. Init is not (a lost answer would leave a second, orphaned session), nor is
 * finalize (a repeated finalize makes Cryptify send its e-mails again).
 */

/**
 * What the storage service lets an upload without an API key hold (`GET /limits`). An upload whose
 * init carried a validated API key has larger limits, which this does not show.
 */
export interface StorageLimits {
  /** Largest ciphertext one upload may be, in bytes. */
  perUploadLimitBytes: number;
  /** Bytes one sender may upload within the rolling window. */
  rollingLimitBytes: number;
  /** The rolling window, in days. */
  windowDays: number;
}

/** What `StorageClient.init` sends: whom the upload is for and whom the service mails. */
export interface InitRequest {
  /** The recipients' e-mail addresses. */
  recipients: readonly string[];
  /** Whether the service mails each recipient a download link. */
  notifyRecipients: boolean;
  /** Whether the service mails the sender a confirmation. */
  confirm: boolean;
  /** Text for those mails. */
  message: string;
  /** Language of those mails. */
  language: 'EN' | 'NL';
  /** Sent as a Bearer at init only: Cryptify validates it with the PKG and raises the upload limits. */
  apiKey: string | undefined;
}

/**
 * An upload in progress at the storage service. `token` moves on with each committed chunk (the
 * upload functions update it in place); keep `uuid`, `recoveryToken`, `challenge` and
 * `maxChunkSize` to resume it after a reload: the status call gives back the token and the offset,
 * not the rest.
 */
export interface UploadSession {
  /** The upload's id: recipients download it by this. */
  uuid: string;
  /** The rolling token the next chunk (or finalize) is sent with. */
  token: string;
  /** Proves a later status call is this uploader's (Cryptify since pg-js 2.3); absent from older servers. */
  recoveryToken?: string;
  /** The storage service's challenge for a proof of possession (32 bytes), when it sends one. */
  challenge?: Uint8Array;
  /** Largest chunk the service accepts, in bytes, when it says (Cryptify: 5 000 000). */
  maxChunkSize?: number;
}

/** Where an upload stands at the storage service (`GET /fileupload/{uuid}/status`). */
export interface UploadStatus {
  /** Ciphertext bytes committed: the next chunk starts here. */
  uploaded: number;
  /** The token the next chunk (or finalize) must carry. */
  token: string;
  /** The token the last committed chunk was sent with; absent before the first chunk. */
  prevToken?: string;
  /** Where the last committed chunk starts; absent before the first chunk. */
  prevOffset?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CHALLENGE = /^(?:[0-9a-f]{2}){16,64}$/i;
const hexBytes = (hex: string): Uint8Array => new Uint8Array(hex.match(/../g)!.map((b) => parseInt(b, 16)));
/** Cryptify's tokens are 64 hex characters; accept any short printable token, refuse anything else. */
const TOKEN = /^[\x21-\x7e]{1,256}$/;

/** Whether `value` can be an upload id: it goes into URL paths, so nothing else may. */
export const isUploadId = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
/** Whether `value` can be a token: it goes into a header, so nothing else may. */
export const isUploadToken = (value: unknown): value is string => typeof value === 'string' && TOKEN.test(value);

const isByteCount = (value: unknown): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
/** Limits may be given as u64::MAX-like "unlimited" figures beyond 2^53: any whole number will do. */
const isLimit = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0;

function readToken(response: Response, url: string, details: ClientErrorDetails): string {
  const token = response.headers.get('cryptifytoken');
  if (!isUploadToken(token)) {
    throw new ClientError(ClientErrorCode.STORAGE_BAD_RESPONSE, 'the storage service did not return an upload token', {
      ...details,
      url,
      status: response.status,
    });
  }
  return token;
}

const badResponse = (what: string, url: string, status: number, details: ClientErrorDetails = {}): ClientError =>
  new ClientError(ClientErrorCode.STORAGE_BAD_RESPONSE, `${what}: the storage service's answer cannot be used`, {
    ...details,
    url,
    status,
  });

/** The error for a non-2xx answer from the storage service. */
async function statusError(
  response: Response,
  url: string,
  what: string,
  details: ClientErrorDetails,
): Promise<ClientError> {
  const status = response.status;
  const context = { ...details, url, status };
  const text = await excerpt(response);
  const suffix = text === '' ? '' : `: ${text}`;
  if (status === 404)
    return new ClientError(
      ClientErrorCode.UPLOAD_EXPIRED,
      `${what}: the storage service no longer knows this upload${suffix}`,
      context,
    );
  if (status === 413)
    return new ClientError(
      ClientErrorCode.UPLOAD_TOO_LARGE,
      `${what}: over the storage service's limit${suffix}`,
      context,
    );
  if (isTransientStatus(status))
    return new ClientError(ClientErrorCode.STORAGE_UNAVAILABLE, `${what}: HTTP ${status}${suffix}`, context);
  return new ClientError(ClientErrorCode.STORAGE_REJECTED, `${what}: HTTP ${status}${suffix}`, context);
}

const unreachable = (what: string, reason: 'network' | 'timeout', attempts: number) =>
  `${what}: the storage service ${reason === 'timeout' ? 'did not answer in time' : 'could not be reached'}` +
  (attempts > 1 ? ` (${attempts} attempts)` : '');

/**
 * A chunk PUT's body and headers. Node's fetch copies a Uint8Array body twice, once when the request
 * is made and once while it is sent: +10 MB of memory per 5 MB chunk, beside the chunk itself. A
 * stream of the one chunk, with its length declared, is sent from the chunk as it is, and the
 * request on the wire is the same (Content-Length, no chunked encoding). Made per attempt: a
 * stream is read once.
 */
function chunkBody(
  chunk: Uint8Array<ArrayBuffer>,
  headers: Record<string, string>,
): Pick<RequestInit, 'body' | 'headers'> & { duplex?: 'half' } {
  // Browsers do not stream request bodies over HTTP/1.1 (Chromium needs HTTP/2, Firefox sends the
  // stream's name, WebKit refuses), and Content-Length is theirs to set. A Blob, not the bytes: a
  // 5 MB PUT from a Uint8Array took Chromium 1.25 s to a loopback server, from a Blob 0.13 s.
  if (isBrowser()) return { body: new Blob([chunk]), headers };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(chunk);
      controller.close();
    },
  });
  return { body, headers: { ...headers, 'content-length': String(chunk.length) }, duplex: 'half' };
}

/**
 * The storage service's upload protocol (see the module comment). Each method is one protocol step
 * with its own deadline (`timeouts.storageMs`, finalize `timeouts.finalizeMs`) and the caller's
 * signal; failures are ClientErrors with stable codes.
 */
export class StorageClient {
  /** Over the resolved configuration: its storage URL, fetch, headers, deadlines and retries. */
  constructor(private readonly config: ResolvedConfig) {}

  /** The headers of every storage request: the configured ones, then the storage-only ones. */
  private headers(extra: Record<string, string>): Record<string, string> {
    return { ...this.config.headers, ...this.config.storageHeaders, ...extra };
  }

  /**
   * Sends a request that may be repeated (its effect is the same however often it arrives) until it
   * is answered with something other than a transient status, with exponential backoff and full
   * jitter between attempts. Returns a 2xx answer; throws the typed error of anything else.
   */
  private async retried(
    what: string,
    url: string,
    init: () => RequestInit,
    signal: AbortSignal | undefined,
    details: ClientErrorDetails,
    accept: (status: number) => boolean = () => false,
  ): Promise<Response> {
    const { maxAttempts } = this.config.retry;
    let last: ClientError | undefined;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (attempt > 1) await backoff(attempt, this.config.retry, signal);
      const result = await exchange(this.config.fetch, url, init(), this.config.timeouts.storageMs, signal);
      if (!result.ok) {
        last = new ClientError(ClientErrorCode.STORAGE_UNAVAILABLE, unreachable(what, result.reason, attempt), {
          ...details,
          url,
          cause: result.cause,
        });
        continue;
      }
      const { response } = result;
      if (response.ok || accept(response.status)) return response;
      last = await statusError(response, url, what, details);
      if (!isTransientStatus(response.status)) throw last;
    }
    throw last!;
  }

  /**
   * The storage service's upload limits (`GET /limits`), or undefined when it does not publish
   * them (a Cryptify older than the endpoint answers 404).
   */
  async limits(signal: AbortSignal | undefined): Promise<StorageLimits | undefined> {
    const url = `${this.config.storageUrl}/limits`;
    const response = await this.retried(
      'upload limits',
      url,
      () => ({ method: 'GET', headers: this.headers({ accept: 'application/json' }) }),
      signal,
      {},
      (status) => status === 404,
    );
    if (response.status === 404) {
      await discard(response);
      return undefined;
    }
    const json = (await readJson(response, signal, 'upload limits', { url })) as Record<string, unknown> | undefined;
    const perUpload = json?.['per_upload_limit_bytes'];
    const rolling = json?.['rolling_limit_bytes'];
    const days = json?.['window_days'];
    if (!isLimit(perUpload) || !isLimit(rolling) || !isLimit(days))
      throw badResponse('upload limits', url, response.status);
    return { perUploadLimitBytes: perUpload, rollingLimitBytes: rolling, windowDays: days };
  }

  /** Starts an upload: the session to send chunks to. Not retried (see the module comment). */
  async init(request: InitRequest, signal: AbortSignal | undefined): Promise<UploadSession> {
    const url = `${this.config.storageUrl}/fileupload/init`;
    const headers = this.headers({ 'content-type': 'application/json', accept: 'application/json' });
    if (request.apiKey !== undefined) headers['authorization'] = `Bearer ${request.apiKey}`;
    const body = JSON.stringify({
      recipient: request.recipients.join(', '),
      mailContent: request.message,
      mailLang: request.language,
      confirm: request.confirm,
      // Always sent: Cryptify's own default is to notify.
      notifyRecipients: request.notifyRecipients,
    });
    const result = await exchange(
      this.config.fetch,
      url,
      { method: 'POST', headers, body },
      this.config.timeouts.storageMs,
      signal,
    );
    if (!result.ok) {
      throw new ClientError(ClientErrorCode.STORAGE_UNAVAILABLE, unreachable('upload init', result.reason, 1), {
        url,
        cause: result.cause,
      });
    }
    const { response } = result;
    if (!response.ok) throw await statusError(response, url, 'upload init', {});
    const token = readToken(response, url, {});
    const json = (await readJson(response, signal, 'upload init', { url })) as Record<string, unknown> | undefined;
    const uuid = json?.['uuid'];
    if (!isUploadId(uuid)) {
      throw new ClientError(
        ClientErrorCode.STORAGE_BAD_RESPONSE,
        'upload init: the storage service did not return an upload UUID',
        { url, status: response.status },
      );
    }
    const session: UploadSession = { uuid, token };
    // Each of these is absent from some Cryptify release; present, it must be usable.
    const recovery = json!['recovery_token'];
    if (recovery !== undefined) {
      if (!isUploadToken(recovery)) throw badResponse('upload init (recovery_token)', url, response.status, { uuid });
      session.recoveryToken = recovery;
    }
    const maxChunk = json!['max_chunk_size_bytes'];
    if (maxChunk !== undefined) {
      if (!isByteCount(maxChunk) || maxChunk === 0)
        throw badResponse('upload init (max_chunk_size_bytes)', url, response.status, { uuid });
      session.maxChunkSize = maxChunk;
    }
    // Cryptify before pg-js 2.5 sends no challenge; a malformed one is ignored the same way.
    const challenge = json!['challenge'];
    if (typeof challenge === 'string' && CHALLENGE.test(challenge)) session.challenge = hexBytes(challenge);
    return session;
  }

  /**
   * Where an upload stands (`GET /fileupload/{uuid}/status`, authenticated by the recovery token
   * from init). UPLOAD_EXPIRED when the service no longer knows it or the recovery token is not its
   * own: Cryptify answers both with the same 404, on purpose.
   */
  async status(uuid: string, recoveryToken: string, signal: AbortSignal | undefined): Promise<UploadStatus> {
    if (!isUploadId(uuid)) throw invalidInput('uuid: expected an upload id (a UUID)');
    if (!isUploadToken(recoveryToken)) throw invalidInput('recoveryToken: expected the recovery token from init');
    const url = `${this.config.storageUrl}/fileupload/${uuid}/status`;
    const details = { uuid };
    const response = await this.retried(
      'upload status',
      url,
      () => ({
        method: 'GET',
        headers: this.headers({ accept: 'application/json', 'x-recovery-token': recoveryToken }),
      }),
      signal,
      details,
    );
    const json = (await readJson(response, signal, 'upload status', { ...details, url })) as
      Record<string, unknown> | undefined;
    const uploaded = json?.['uploaded'];
    const token = json?.['cryptify_token'];
    const prevToken = json?.['prev_token'];
    const prevOffset = json?.['prev_offset'];
    if (!isByteCount(uploaded) || !isUploadToken(token))
      throw badResponse('upload status', url, response.status, details);
    if (prevToken === undefined && prevOffset === undefined) return { uploaded, token };
    // The last chunk lies before `uploaded` and is not empty.
    if (!isUploadToken(prevToken) || !isByteCount(prevOffset) || prevOffset >= uploaded)
      throw badResponse('upload status', url, response.status, details);
    return { uploaded, token, prevToken, prevOffset };
  }

  /**
   * Stores `chunk` at `offset` and returns the next token (the caller stores it in the session).
   * Transport failures and transient statuses are retried with the same token and offset: the one
   * token that is right both when the first attempt never arrived and when only its answer was lost
   * (see the module comment).
   */
  async putChunk(
    session: UploadSession,
    offset: number,
    chunk: Uint8Array<ArrayBuffer>,
    signal: AbortSignal | undefined,
  ): Promise<string> {
    if (chunk.length === 0) throw invalidInput('a chunk cannot be empty (the storage service refuses one)');
    if (session.maxChunkSize !== undefined && chunk.length > session.maxChunkSize)
      throw invalidInput(`a chunk of ${chunk.length} bytes is over the service's ${session.maxChunkSize}`);
    const url = `${this.config.storageUrl}/fileupload/${session.uuid}`;
    // Fixed before the first attempt: the session's token may be moved on by the caller meanwhile.
    const headers = this.headers({
      'content-type': 'application/octet-stream',
      cryptifytoken: session.token,
      'content-range': `bytes ${offset}-${offset + chunk.length}/*`,
    });
    const details = { uuid: session.uuid, uploadedBytes: offset };
    const response = await this.retried(
      `chunk at ${offset}`,
      url,
      () => ({ method: 'PUT', ...chunkBody(chunk, headers) }),
      signal,
      details,
    );
    const token = readToken(response, url, details);
    await discard(response);
    return token;
  }

  /**
   * Completes the upload: the storage service checks the total and the header, then notifies.
   * `proof` (base64 of signChallenge over the upload's challenge) proves the sender's key.
   */
  async finalize(
    session: UploadSession,
    total: number,
    signal: AbortSignal | undefined,
    proof?: string,
  ): Promise<void> {
    const url = `${this.config.storageUrl}/fileupload/finalize/${session.uuid}`;
    const details = { uuid: session.uuid, uploadedBytes: total };
    const headers = this.headers({ cryptifytoken: session.token, 'content-range': `bytes */${total}` });
    if (proof !== undefined) headers['x-postguard-proof'] = proof;
    const result = await exchange(
      this.config.fetch,
      url,
      { method: 'POST', headers },
      this.config.timeouts.finalizeMs,
      signal,
    );
    if (!result.ok) {
      throw new ClientError(
        ClientErrorCode.FINALIZE_UNCONFIRMED,
        `finalize: ${result.reason === 'timeout' ? 'no answer in time' : 'the connection failed'}; the upload may or may not be complete`,
        { ...details, url, cause: result.cause },
      );
    }
    const { response } = result;
    if (!response.ok) throw await statusError(response, url, 'finalize', details);
    await discard(response);
  }
}
