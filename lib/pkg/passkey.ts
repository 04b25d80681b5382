import { PkgClientError, PkgClientErrorCode, aborted } from './errors.js';
import type { CryptoKeyLike } from '../web-types.js';
import { isSealedSecret, openUnder, sealUnder, type SecretBox } from './secret-box.js';

/**
 * The passkey tier of keys at rest: the wrapping key of the PKG client's cache comes from a
 * passkey's WebAuthn PRF output (HKDF-SHA-256, bound to the credential id and the PKG's URL) and
 * lives only in this page's memory. One assertion with user verification unlocks it for the page
 * session; nothing of it is ever stored, so a copy of the origin's storage, or the unlocked profile
 * in other hands, opens nothing without the authenticator and the user's PIN or biometric.
 *
 * Where PRF is missing (the browser, the authenticator) this says so, `PRF_UNAVAILABLE`: the
 * caller decides; nothing falls back to the device key or to the clear.
 */

/** A passkey made for the key cache (`createPasskey`, `PkgClient.registerPasskey`). Not secret. */
export interface PasskeyRegistration {
  /** The credential's id, base64url without padding. */
  credentialId: string;
}

/** Where and how long a passkey is asked. */
export interface PasskeyOptions {
  /** The WebAuthn relying party id; default the page's host. */
  rpId?: string;
  /** How long the browser's prompt may wait for the user or the authenticator. 60 s. */
  timeoutMs?: number;
}

/** What `createPasskey` takes besides {@link PasskeyOptions}. */
export interface CreatePasskeyOptions extends PasskeyOptions {
  /** The name the authenticator shows for the passkey. Default "PostGuard keys". */
  userName?: string;
  /** The relying party's name the authenticator shows. Default "PostGuard". */
  rpName?: string;
  /** Aborts the browser's prompt (`ABORTED`). */
  signal?: AbortSignal;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const encoder = new TextEncoder();
/** The PRF input: one fixed value, so the same passkey gives the same output every session. */
const PRF_INPUT = encoder.encode('postguard-ts key cache wrapping key v1');
const HKDF_SALT = encoder.encode('postguard-ts|passkey-tier');
/** authenticatorData's flags byte (after the 32-byte RP id hash): bit 2 is "user verified". */
const FLAGS_OFFSET = 32;
const USER_VERIFIED = 0x04;
/** What the PRF extension gives: 32 bytes (HMAC-SHA-256 in the authenticator). */
const PRF_OUTPUT_BYTES = 32;

const toBase64Url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes))
    .replaceAll('+', '-')
    .replaceAll('/', '_')
    .replaceAll('=', '');

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  const plain = text.replaceAll('-', '+').replaceAll('_', '/');
  return Uint8Array.from(atob(plain + '='.repeat((4 - (plain.length % 4)) % 4)), (c) => c.charCodeAt(0));
}

const BASE64URL = /^[\w-]{16,1366}$/;

function checkCredentialId(id: unknown): string {
  if (typeof id !== 'string' || !BASE64URL.test(id))
    throw new PkgClientError(PkgClientErrorCode.INVALID_ARGUMENT, 'a passkey credential id is base64url');
  return id;
}

const prfUnavailable = (why: string) =>
  new PkgClientError(PkgClientErrorCode.PRF_UNAVAILABLE, `no key from a passkey here: ${why}`);

const passkeyFailed = (why: string, cause?: unknown) =>
  new PkgClientError(PkgClientErrorCode.PASSKEY_FAILED, `the passkey gave no key: ${why}`, { cause });

function webAuthn(): CredentialsContainer {
  if (
    typeof navigator === 'undefined' ||
    navigator.credentials === undefined ||
    typeof PublicKeyCredential === 'undefined'
  )
    throw prfUnavailable('this browser has no WebAuthn');
  return navigator.credentials;
}

/** A browser's refusal, typed: an abort is the caller's; anything else the passkey's. */
function refused(error: unknown, signal: AbortSignal | undefined): PkgClientError {
  if (error instanceof PkgClientError) return error;
  if (signal?.aborted === true) return aborted(signal.reason);
  const name = error instanceof Error ? error.name : '';
  if (name === 'NotSupportedError') return prfUnavailable('the authenticator does not support it');
  return passkeyFailed(
    name === 'NotAllowedError'
      ? 'refused, timed out, or no authenticator here holds it'
      : `the browser refused (${name || 'unknown'})`,
    error,
  );
}

/**
 * Makes a passkey that can give the key cache its wrapping key: user verification required, the
 * PRF extension asked for. Throws `PRF_UNAVAILABLE` when the authenticator cannot evaluate PRF
 * (the credential it made is then of no use here; the authenticator keeps it), `PASSKEY_FAILED`
 * when the user or the browser refuses.
 */
export async function createPasskey(options: CreatePasskeyOptions = {}): Promise<PasskeyRegistration> {
  const credentials = webAuthn();
  let credential: Credential | null;
  try {
    credential = await credentials.create({
      publicKey: {
        rp: { name: options.rpName ?? 'PostGuard', ...(options.rpId === undefined ? {} : { id: options.rpId }) },
        user: {
          id: crypto.getRandomValues(new Uint8Array(16)),
          name: options.userName ?? 'PostGuard keys',
          displayName: options.userName ?? 'PostGuard keys',
        },
        // No server checks this attestation: the passkey only ever unlocks this page's own cache.
        challenge: crypto.getRandomValues(new Uint8Array(32)),
        pubKeyCredParams: [
          { type: 'public-key', alg: -7 },
          { type: 'public-key', alg: -257 },
        ],
        authenticatorSelection: { userVerification: 'required', residentKey: 'preferred' },
        timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        extensions: { prf: {} } as AuthenticationExtensionsClientInputs,
      },
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  } catch (error) {
    throw refused(error, options.signal);
  }
  if (!(credential instanceof PublicKeyCredential)) throw passkeyFailed('the browser made no credential');
  const prf = (credential.getClientExtensionResults() as { prf?: { enabled?: boolean } }).prf;
  if (prf?.enabled !== true) throw prfUnavailable('the authenticator does not evaluate the PRF extension');
  return { credentialId: toBase64Url(new Uint8Array(credential.rawId)) };
}

/**
 * One assertion of `registration`'s passkey with user verification, its PRF output turned into an
 * AES-256-GCM key bound to the credential and to `pkgUrl` (non-extractable).
 */
export async function passkeyWrappingKey(
  registration: PasskeyRegistration,
  pkgUrl: string,
  options: PasskeyOptions & { signal?: AbortSignal } = {},
): Promise<CryptoKeyLike> {
  const credentialId = checkCredentialId(registration.credentialId);
  const credentials = webAuthn();
  let assertion: Credential | null;
  try {
    assertion = await credentials.get({
      publicKey: {
        challenge: crypto.getRandomValues(new Uint8Array(32)),
        allowCredentials: [{ type: 'public-key', id: fromBase64Url(credentialId) }],
        userVerification: 'required',
        timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        ...(options.rpId === undefined ? {} : { rpId: options.rpId }),
        extensions: { prf: { eval: { first: PRF_INPUT } } } as AuthenticationExtensionsClientInputs,
      },
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  } catch (error) {
    throw refused(error, options.signal);
  }
  if (!(assertion instanceof PublicKeyCredential)) throw passkeyFailed('the browser gave no assertion');
  if (toBase64Url(new Uint8Array(assertion.rawId)) !== credentialId)
    throw new PkgClientError(PkgClientErrorCode.PASSKEY_MISMATCH, 'another passkey answered than the one asked for');
  const data = new Uint8Array((assertion.response as AuthenticatorAssertionResponse).authenticatorData);
  if (((data[FLAGS_OFFSET] ?? 0) & USER_VERIFIED) === 0)
    throw passkeyFailed('the authenticator did not verify the user');
  const results = (assertion.getClientExtensionResults() as { prf?: { results?: { first?: BufferSource } } }).prf
    ?.results;
  if (results?.first === undefined) throw prfUnavailable('the authenticator gave no PRF output');
  const first = results.first;
  if (first.byteLength !== PRF_OUTPUT_BYTES) throw prfUnavailable('the PRF output is not 32 bytes');
  const output = ArrayBuffer.isView(first)
    ? new Uint8Array(first.buffer, first.byteOffset, first.byteLength)
    : new Uint8Array(first);
  try {
    const ikm = await crypto.subtle.importKey('raw', output, 'HKDF', false, ['deriveKey']);
    return await crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: HKDF_SALT, info: encoder.encode(`pg|passkey|${credentialId}|${pkgUrl}`) },
      ikm,
      { name: 'AES-GCM', length: 256 },
      false,
      ['encrypt', 'decrypt'],
    );
  } finally {
    output.fill(0);
  }
}

/** Where a passkey box finds its passkey: asked each time, so a registration made later is used. */
export type PasskeySource = () => Promise<PasskeyRegistration | undefined>;

/**
 * The passkey tier as a {@link SecretBox}: the first seal or open asks the passkey once, and the
 * key it gives is kept in memory for the box's life (the page session); `forget()` drops it, so the
 * next use asks again. Entries another passkey sealed throw `PASSKEY_MISMATCH`; the device tier's
 * read as absent (never opened, never a fallback).
 */
export function passkeyBox(source: PasskeySource, pkgUrl: string, options: PasskeyOptions = {}): SecretBox {
  let key: Promise<{ id: string; key: CryptoKeyLike }> | undefined;
  const registered = async (): Promise<PasskeyRegistration> => {
    const registration = await source();
    if (registration === undefined) throw passkeyFailed('none is registered (registerPasskey)');
    return registration;
  };
  const unlock = async (registration: PasskeyRegistration) => {
    const id = `passkey:${registration.credentialId}`;
    // A key unlocked for a passkey since replaced is not used for the new one.
    if (key !== undefined && (await key.catch(() => undefined))?.id !== id) key = undefined;
    const pending = (key ??= passkeyWrappingKey(registration, pkgUrl, options).then((k) => ({ id, key: k })));
    // A refusal is not kept: the next use asks again.
    pending.catch(() => {
      if (key === pending) key = undefined;
    });
    return pending;
  };
  return {
    tier: 'passkey',
    async seal(plain, context) {
      const { id, key: k } = await unlock(await registered());
      return { ...(await sealUnder(k, plain, context)), by: id };
    },
    async open(sealed, context) {
      if (!isSealedSecret(sealed) || sealed.by === undefined || !sealed.by.startsWith('passkey:')) return undefined;
      const registration = await registered();
      // Checked before the prompt: an entry of another passkey is a mismatch whatever the user does.
      if (sealed.by !== `passkey:${registration.credentialId}`)
        throw new PkgClientError(
          PkgClientErrorCode.PASSKEY_MISMATCH,
          'the cached keys were sealed under another passkey (forget them, or use that passkey)',
        );
      return openUnder((await unlock(registration)).key, sealed, context);
    },
    async forget() {
      key = undefined;
    },
  };
}
