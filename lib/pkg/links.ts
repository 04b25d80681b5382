import { invalidArgument } from './errors.js';

/**
 * The session pointer and the links a browser shows for it: a QR for another device, and a link
 * that opens the Yivi app on this one. The Yivi app finds the JSON pointer in any of these forms.
 * They are the links Yivi's own web frontend makes (privacybydesign/yivi-frontend-packages,
 * plugins/yivi-client/src/state-client.ts: the QR's `continueOnSecondDevice`, the Android intent).
 */

/** What the identity server hands out for a session: the wallet's URL and the session type. */
export interface SessionPointer {
  /** The URL the Yivi app talks to for this session. */
  u: string;
  /** The session type, e.g. "disclosing". */
  irmaqr: string;
}

/** Where universal links to the Yivi app start; the session pointer follows, URL-encoded. */
export const UNIVERSAL_LINK_PREFIX = 'https://open.yivi.app/-/session#';
const ANDROID_PACKAGE = 'org.irmacard.cardemu';

/** Checks the shape of a pointer from an untrusted answer: `u` must be an http(s) URL. */
export function isSessionPointer(value: unknown): value is SessionPointer {
  if (typeof value !== 'object' || value === null) return false;
  const { u, irmaqr } = value as { u?: unknown; irmaqr?: unknown };
  if (typeof u !== 'string' || typeof irmaqr !== 'string' || !/^[a-z]{1,20}$/.test(irmaqr)) return false;
  try {
    const url = new URL(u);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}

const encodePointer = (pointer: SessionPointer, extra: Record<string, unknown> = {}): string => {
  if (!isSessionPointer(pointer)) throw invalidArgument('not a session pointer {u, irmaqr}');
  return encodeURIComponent(JSON.stringify({ u: pointer.u, irmaqr: pointer.irmaqr, ...extra }));
};

/** What the QR encodes: the universal link, marked so the app continues on the scanning phone. */
export const qrLink = (pointer: SessionPointer): string =>
  UNIVERSAL_LINK_PREFIX + encodePointer(pointer, { continueOnSecondDevice: true });

/** Opens the Yivi app on the device that shows the page (iOS, and Android browsers that honour app links). */
export const universalLink = (pointer: SessionPointer): string => UNIVERSAL_LINK_PREFIX + encodePointer(pointer);

/** The Android intent link; Android webviews and custom tabs do not open universal links reliably. */
export const androidIntentLink = (pointer: SessionPointer, nowMs = Date.now()): string =>
  `intent://qr/json/${encodePointer(pointer)}#Intent;package=${ANDROID_PACKAGE};scheme=irma;l.timestamp=${nowMs};end`;

/** What kind of device a page runs on, as far as opening the Yivi app goes. */
export type DeviceKind = 'android' | 'ios' | 'desktop';

/** The kind of device a user agent string names: which same-device link works there. */
export function deviceKind(userAgent: string): DeviceKind {
  if (/Android/i.test(userAgent)) return 'android';
  if (/iPad|iPhone|iPod/.test(userAgent) || (/Macintosh/.test(userAgent) && /Mobile/.test(userAgent))) return 'ios';
  return 'desktop';
}

/** The same-device link for this user agent: the intent link on Android, the universal link elsewhere. */
export function sameDeviceLink(pointer: SessionPointer, userAgent = globalThis.navigator?.userAgent ?? ''): string {
  return deviceKind(userAgent) === 'android' ? androidIntentLink(pointer) : universalLink(pointer);
}
