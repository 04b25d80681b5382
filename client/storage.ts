import type { ResolvedConfig } from './config.js';
import { ClientError, ClientErrorCode, type ClientErrorDetails } from './errors.js';
import { discard, exchange, excerpt, isTransientStatus, readJson, sleep } from './http.js';

/**
 * The Cryptify upload protocol, client side, as Cryptify implements it:
 *
 *   POST /fileupload/init            → {uuid}, header cryptifytoken
 *   PUT  /fileupload/{uuid}          Content-Range: bytes <offset>-<offset + length>/*   (end EXCLUSIVE)
 *                                    cryptifytoken: <current>  → header cryptifytoken: <next>
 *   POST /fileupload/finalize/{uuid} Content-Range: bytes * / <total>  (written without the spaces)
 *
 * Retries: only chunk PUTs are retried. That is safe because Cryptify remembers the last chunk it
 * committed: a chunk sent again with the same token and offset is either stored (if the first
 * attempt never arrived) or recognised and answered with the same next token (if only the answer
 * was lost). Init is not retried (a lost answer would leave a second, orphaned session), nor is
 * finalize (a repeated finalize makes Cryptify send its e-mails again).
 */

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
): Pick<RequestInit, 'body' | 'headers'> & { duplex: 'half' } {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(chunk);
      controller.close();
    },
  });
  return { body, headers: { ...headers, 'content-length': String(chunk.length) }, duplex: 'half' };
}

export interface InitRequest {
  recipients: readonly string[];
  notifyRecipients: boolean;
  confirm: boolean;
  message: string;
  language: 'EN' | 'NL';
  /** Sent as a Bearer at init only: Cryptify validates it with the PKG and raises the upload limits. */
  apiKey: string | undefined;
}

export interface UploadSession {
  uuid: string;
  token: string;
  /** The storage service's challenge for a proof of possession (32 bytes), when it sends one. */
  challenge?: Uint8Array;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CHALLENGE = /^(?:[0-9a-f]{2}){16,64}$/i;
const hexBytes = (hex: string): Uint8Array => new Uint8Array(hex.match(/../g)!.map((b) => parseInt(b, 16)));
/** Cryptify's tokens are 64 hex characters; accept any short printable token, refuse anything else. */
const TOKEN = /^[\x21-\x7e]{1,256}$/;

function readToken(response: Response, url: string, details: ClientErrorDetails): string {
  const token = response.headers.get('cryptifytoken');
  if (token === null || !TOKEN.test(token)) {
    throw new ClientError(ClientErrorCode.STORAGE_BAD_RESPONSE, 'the storage service did not return an upload token', {
      ...details,
      url,
      status: response.status,
    });
  }
  return token;
}

/** The error for a non-2xx answer from the storage service. */
async function statusError(response: Response, url: string, what: string, details: ClientErrorDetails): Promise<ClientError> {
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
    return new ClientError(ClientErrorCode.UPLOAD_TOO_LARGE, `${what}: over the storage service's limit${suffix}`, context);
  if (isTransientStatus(status))
    return new ClientError(ClientErrorCode.STORAGE_UNAVAILABLE, `${what}: HTTP ${status}${suffix}`, context);
  return new ClientError(ClientErrorCode.STORAGE_REJECTED, `${what}: HTTP ${status}${suffix}`, context);
}

export class StorageClient {
  constructor(private readonly config: ResolvedConfig) {}

  async init(request: InitRequest, signal: AbortSignal | undefined): Promise<UploadSession> {
    const url = `${this.config.storageUrl}/fileupload/init`;
    const headers: Record<string, string> = {
      ...this.config.headers,
      'content-type': 'application/json',
      accept: 'application/json',
    };
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
      throw new ClientError(
        ClientErrorCode.STORAGE_UNAVAILABLE,
        `upload init: the storage service ${result.reason === 'timeout' ? 'did not answer in time' : 'could not be reached'}`,
        {
          url,
          cause: result.cause,
        },
      );
    }
    const { response } = result;
    if (!response.ok) throw await statusError(response, url, 'upload init', {});
    const token = readToken(response, url, {});
    const json = (await readJson(response)) as { uuid?: unknown; challenge?: unknown } | undefined;
    const uuid = json?.uuid;
    if (typeof uuid !== 'string' || !UUID.test(uuid)) {
      throw new ClientError(
        ClientErrorCode.STORAGE_BAD_RESPONSE,
        'upload init: the storage service did not return an upload UUID',
        { url, status: response.status },
      );
    }
    // Cryptify before pg-js 2.5 sends no challenge; a malformed one is ignored the same way.
    const challenge =
      typeof json?.challenge === 'string' && CHALLENGE.test(json.challenge) ? hexBytes(json.challenge) : undefined;
    return challenge === undefined ? { uuid, token } : { uuid, token, challenge };
  }

  /**
   * Stores `chunk` at `offset` and returns the next token. Transport failures and transient
   * statuses are retried with the same token and offset (see the module comment).
   */
  async putChunk(
    session: UploadSession,
    offset: number,
    chunk: Uint8Array<ArrayBuffer>,
    signal: AbortSignal | undefined,
  ): Promise<string> {
    const url = `${this.config.storageUrl}/fileupload/${session.uuid}`;
    const headers = {
      ...this.config.headers,
      'content-type': 'application/octet-stream',
      cryptifytoken: session.token,
      'content-range': `bytes ${offset}-${offset + chunk.length}/*`,
    };
    const details = { uuid: session.uuid, uploadedBytes: offset };
    const { maxAttempts, initialDelayMs, maxDelayMs } = this.config.retry;
    let last: ClientError | undefined;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (attempt > 1) {
        const ceiling = Math.min(maxDelayMs, initialDelayMs * 2 ** (attempt - 2));
        await sleep(Math.random() * ceiling, signal);
      }
      const init = { method: 'PUT', ...chunkBody(chunk, headers) };
      const result = await exchange(this.config.fetch, url, init, this.config.timeouts.storageMs, signal);
      if (!result.ok) {
        last = new ClientError(
          ClientErrorCode.STORAGE_UNAVAILABLE,
          `chunk at ${offset}: the storage service ${result.reason === 'timeout' ? 'did not answer in time' : 'could not be reached'} (${attempt} attempt${attempt > 1 ? 's' : ''})`,
          { ...details, url, cause: result.cause },
        );
        continue;
      }
      const { response } = result;
      if (response.ok) {
        const token = readToken(response, url, details);
        await discard(response);
        return token;
      }
      last = await statusError(response, url, `chunk at ${offset}`, details);
      if (!isTransientStatus(response.status)) throw last;
    }
    throw last!;
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
    const headers: Record<string, string> = {
      ...this.config.headers,
      cryptifytoken: session.token,
      'content-range': `bytes */${total}`,
    };
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
