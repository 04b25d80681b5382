import { hostDescription } from './host.js';
import { sameOriginFetch } from './http.js';
import { CLIENT_NAME, CLIENT_VERSION } from './version.js';

/**
 * The client's configuration and its validation. Mistakes here are programming errors, so they
 * throw a TypeError whose message starts with the field name, before anything is sent.
 */

/** The part of `fetch` the SDK calls, so a custom agent or a test double can stand in for it. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** How long each kind of request may take before it fails (or is retried). */
export interface Timeouts {
  /** Per PKG request (parameters, signing key). 30 000 ms. */
  pkgMs?: number;
  /** Per storage request attempt: init and each chunk PUT. 60 000 ms. */
  storageMs?: number;
  /** The finalize request (the storage service reads the header and sends e-mails). 120 000 ms. */
  finalizeMs?: number;
  /**
   * Downloads (open by uuid or url: the header, the ciphertext, a bundle's entries): how long an
   * answer may take, and then how long its body may go without delivering 16 KiB, so a server that
   * drips a byte at a time ends too. A stalled body is resumed a few times, then fails. 30 000 ms.
   */
  idleMs?: number;
  /**
   * An overall deadline for a download: inspect(), or decrypt() from its header to the last byte
   * delivered (the time a Yivi scan takes is not counted); TIMED_OUT when it passes. 0 (default): none.
   */
  transferMs?: number;
  /**
   * An overall deadline for an upload: `upload()` from its first request to the finalize's answer
   * (a Yivi scan included; the keys come first), or `resume()`; TIMED_OUT when it passes, and a
   * kept upload stays resumable. 0 (default): none; each request still has its own deadline.
   */
  uploadMs?: number;
}

/** How storage chunk uploads are retried after a failure that may pass. */
export interface RetryOptions {
  /** Attempts per chunk, the first included. 5. */
  maxAttempts?: number;
  /** Backoff before the second attempt; doubles each time, with full jitter. 500 ms. */
  initialDelayMs?: number;
  /** Upper bound of a single backoff. 30 000 ms. */
  maxDelayMs?: number;
}

/**
 * What `new PostGuard(config)` takes: the PKG and storage service to use, and how to reach them.
 * A mistake in it throws a TypeError naming the field.
 */
export interface PostGuardConfig {
  /** The PKG, an absolute https URL (a path prefix is kept; a trailing slash is dropped). */
  pkgUrl: string;
  /**
   * The Cryptify-style storage service, an absolute https URL (pg-js's name). Needed to upload and
   * to open by upload id; without it the client seals and opens files and bytes only.
   */
  cryptifyUrl?: string;
  /** The same as `cryptifyUrl` (the SDK's earlier name); give one of the two. */
  storageUrl?: string;
  /** Also accept http://localhost, http://127.0.0.1 and http://[::1] (local development only). */
  allowInsecureUrls?: boolean;
  /** The fetch to use (default: the global one). Bring your own for proxies, custom agents or tests. */
  fetch?: FetchLike;
  /** Extra headers for every PKG and storage request (e.g. for a gateway). */
  headers?: Record<string, string>;
  /**
   * Names the sending app to the storage service, as pg-js 2.6 does: the `X-Cryptify-Source`
   * header, which Cryptify counts uploads by (e.g. 'thunderbird'). Sent to the storage service
   * only, never to the PKG. Printable ASCII, at most 256 characters.
   */
  cryptifySource?: string;
  /** Deadlines per request; each has a default. */
  timeouts?: Timeouts;
  /** Retries of storage chunk uploads; each setting has a default. */
  retry?: RetryOptions;
  /** Ciphertext bytes per chunk PUT: at most what the storage service accepts (Cryptify: 5 000 000). 5 000 000. */
  uploadChunkSize?: number;
  /** Attribute types the PKG and the storage service use for e-mail addresses and domains. */
  attributes?: { email?: string; domain?: string };
  /** The same as `attributes` (pg-js's name); give one of the two. */
  emailAttributes?: { email?: string; domain?: string };
  /**
   * Your app's receive page, an absolute http(s) URL (e.g. `https://app.example/receive.html`):
   * `pg.receiveLink({ uuid }, recipient)` adds `?uuid=…&recipient=…` to it, the link to give a
   * recipient (the storage service mails its own, to its website).
   */
  receiveUrl?: string;
}

export interface ResolvedConfig {
  pkgUrl: string;
  storageUrl: string;
  fetch: FetchLike;
  headers: Record<string, string>;
  /** Headers for storage requests only, on top of `headers` (X-Cryptify-Source). */
  storageHeaders: Record<string, string>;
  timeouts: Required<Timeouts>;
  retry: Required<RetryOptions>;
  uploadChunkSize: number;
  attributes: { email: string; domain: string };
  /** The receive page (`receiveUrl`), or '' when none is configured. */
  receiveUrl: string;
}

/** The attribute type for e-mail addresses unless `attributes.email` says otherwise. */
export const DEFAULT_EMAIL_ATTRIBUTE = 'pbdf.sidn-pbdf.email.email';
/** The attribute type for e-mail domains unless `attributes.domain` says otherwise. */
export const DEFAULT_DOMAIN_ATTRIBUTE = 'pbdf.sidn-pbdf.email.domain';
/** Ciphertext bytes per upload chunk unless `uploadChunkSize` says otherwise: Cryptify's limit. */
export const DEFAULT_CHUNK_SIZE = 5_000_000;
export const CLIENT_VERSION_HEADER = 'X-POSTGUARD-CLIENT-VERSION';

/** Longest timer Node and browsers honour (2^31 - 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
const HEADER_NAME = /^[!#$%&'*+.^\w`|~-]+$/;

const fail = (field: string, rule: string): never => {
  throw new TypeError(`${field}: ${rule}`);
};

function serviceUrl(field: string, value: unknown, allowInsecure: boolean): string {
  const hint = allowInsecure
    ? 'must be an absolute https URL, or http on localhost, 127.0.0.1 or [::1]'
    : 'must be an absolute https URL (set allowInsecureUrls for http://localhost in development)';
  if (typeof value !== 'string' || value === '') return fail(field, hint);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return fail(field, `${hint}; got ${JSON.stringify(value)}`);
  }
  const insecureOk = allowInsecure && url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !insecureOk) return fail(field, `${hint}; got ${JSON.stringify(value)}`);
  if (url.username !== '' || url.password !== '') return fail(field, 'must not carry credentials (user:password@)');
  if (url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    return fail(field, 'must not have a query or fragment (it is a base URL)');
  }
  return url.href.replace(/(?<!\/)\/+$/, '');
}

/** A page's URL (a link people open, not a service the client calls): absolute http(s), no fragment. */
function pageUrl(field: string, value: unknown): string {
  if (value === undefined) return '';
  const rule = 'must be an absolute http(s) URL of a page, without a fragment';
  if (typeof value !== 'string' || value === '') return fail(field, rule);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return fail(field, `${rule}; got ${JSON.stringify(value)}`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.hash !== '' || value.includes('#'))
    return fail(field, `${rule}; got ${JSON.stringify(value)}`);
  if (url.username !== '' || url.password !== '') return fail(field, 'must not carry credentials (user:password@)');
  return url.href;
}

function milliseconds(field: string, value: unknown, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > MAX_TIMER_MS) {
    return fail(field, `must be a number of milliseconds from ${min} to ${MAX_TIMER_MS}`);
  }
  return value;
}

function headersOf(value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return fail('headers', 'must be an object of header name to string value');
  }
  const out: Record<string, string> = {};
  for (const [name, v] of Object.entries(value)) {
    if (!HEADER_NAME.test(name)) fail('headers', `${JSON.stringify(name)} is not a valid header name`);
    if (typeof v !== 'string' || /[\0\r\n]/.test(v))
      fail('headers', `the value of ${name} must be a string without CR, LF or NUL`);
    out[name] = v as string;
  }
  return out;
}

/** The storage-only headers: a PKG has no business knowing which app uploads. */
function storageHeadersOf(source: unknown): Record<string, string> {
  if (source === undefined) return {};
  if (typeof source !== 'string' || source.length > 256 || source !== source.trim() || !/^[\x20-\x7e]+$/.test(source)) {
    return fail('cryptifySource', 'must be 1 to 256 printable ASCII characters, without surrounding spaces');
  }
  return { 'X-Cryptify-Source': source };
}

function attributeType(field: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[^\s.]+(?:\.[^\s.]+)+$/.test(value)) {
    return fail(field, 'must be an attribute type such as pbdf.sidn-pbdf.email.email');
  }
  return value;
}

function objectOrUndefined(field: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(field, 'must be an object');
  return value as Record<string, unknown>;
}

export function resolveConfig(config: PostGuardConfig): ResolvedConfig {
  if (typeof config !== 'object' || config === null)
    throw new TypeError('config: expected an object with pkgUrl (and cryptifyUrl to upload)');
  const allowInsecure = config.allowInsecureUrls ?? false;
  if (typeof allowInsecure !== 'boolean') fail('allowInsecureUrls', 'must be a boolean');
  const pkgUrl = serviceUrl('pkgUrl', config.pkgUrl, allowInsecure);
  if (config.cryptifyUrl !== undefined && config.storageUrl !== undefined)
    fail('cryptifyUrl', 'give cryptifyUrl or storageUrl, not both');
  const storageField = config.storageUrl !== undefined ? 'storageUrl' : 'cryptifyUrl';
  const storageGiven = config.cryptifyUrl ?? config.storageUrl;
  // '' when there is none: upload() and open({uuid}) say so when they are called.
  const storageUrl = storageGiven === undefined ? '' : serviceUrl(storageField, storageGiven, allowInsecure);

  const fetchFn = config.fetch ?? (globalThis.fetch as FetchLike | undefined);
  if (typeof fetchFn !== 'function') fail('fetch', 'must be a function (no global fetch is available)');

  const headers = headersOf(config.headers);
  if (!Object.keys(headers).some((h) => h.toLowerCase() === CLIENT_VERSION_HEADER.toLowerCase())) {
    headers[CLIENT_VERSION_HEADER] = `${hostDescription()},${CLIENT_NAME},${CLIENT_VERSION}`;
  }

  const timeouts = objectOrUndefined('timeouts', config.timeouts);
  const retry = objectOrUndefined('retry', config.retry);
  const maxAttempts = retry['maxAttempts'] ?? 5;
  if (typeof maxAttempts !== 'number' || !Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 20) {
    fail('retry.maxAttempts', 'must be an integer from 1 to 20');
  }
  const chunkSize = config.uploadChunkSize ?? DEFAULT_CHUNK_SIZE;
  if (typeof chunkSize !== 'number' || !Number.isSafeInteger(chunkSize) || chunkSize < 1 || chunkSize > 1 << 30) {
    fail('uploadChunkSize', 'must be an integer number of bytes from 1 to 2^30');
  }
  if (config.attributes !== undefined && config.emailAttributes !== undefined)
    fail('emailAttributes', 'give emailAttributes or attributes, not both');
  const attributes =
    config.emailAttributes !== undefined
      ? objectOrUndefined('emailAttributes', config.emailAttributes)
      : objectOrUndefined('attributes', config.attributes);

  return {
    pkgUrl,
    storageUrl,
    // Redirects are followed only within an origin: the app's headers never go elsewhere.
    fetch: sameOriginFetch(
      fetchFn === globalThis.fetch ? (input, init) => globalThis.fetch(input, init) : (fetchFn as FetchLike),
    ),
    headers,
    storageHeaders: storageHeadersOf(config.cryptifySource),
    timeouts: {
      pkgMs: milliseconds('timeouts.pkgMs', timeouts['pkgMs'], 30_000),
      storageMs: milliseconds('timeouts.storageMs', timeouts['storageMs'], 60_000),
      finalizeMs: milliseconds('timeouts.finalizeMs', timeouts['finalizeMs'], 120_000),
      idleMs: milliseconds('timeouts.idleMs', timeouts['idleMs'], 30_000),
      transferMs: milliseconds('timeouts.transferMs', timeouts['transferMs'], 0, 0),
      uploadMs: milliseconds('timeouts.uploadMs', timeouts['uploadMs'], 0, 0),
    },
    retry: {
      maxAttempts: maxAttempts as number,
      initialDelayMs: milliseconds('retry.initialDelayMs', retry['initialDelayMs'], 500, 0),
      maxDelayMs: milliseconds('retry.maxDelayMs', retry['maxDelayMs'], 30_000, 0),
    },
    uploadChunkSize: chunkSize,
    attributes: {
      email: attributeType('attributes.email', attributes['email'], DEFAULT_EMAIL_ATTRIBUTE),
      domain: attributeType('attributes.domain', attributes['domain'], DEFAULT_DOMAIN_ATTRIBUTE),
    },
    receiveUrl: pageUrl('receiveUrl', config.receiveUrl),
  };
}
