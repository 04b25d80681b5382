import { ClientErrorCode, isClientError } from 'postguard-ts/client';
import { describeError, type ErrorText } from './messages.js';

/**
 * Texts for the client's error codes (postguard-ts/client), for the send and receive pages; any
 * other error goes to the demo's table (messages.ts). Where the client's message carries the facts
 * a person needs (the limit in bytes, the recipients a file is for), it is the hint.
 */

const TEXTS: Partial<Record<ClientErrorCode, [string, string | undefined]>> = {
  UPLOAD_TOO_LARGE: ['This is too large for the storage service.', undefined],
  UPLOAD_EXPIRED: [
    'The storage service no longer has this upload.',
    'It waited too long unfinished. Send the files again.',
  ],
  STORAGE_UNAVAILABLE: [
    'The storage service cannot be reached.',
    'Check your connection and try again; an unfinished upload continues when you reload this page.',
  ],
  STORAGE_REJECTED: ['The storage service refused the request.', undefined],
  STORAGE_BAD_RESPONSE: ['The storage service answered something unexpected.', undefined],
  FINALIZE_UNCONFIRMED: [
    'The upload may or may not have completed.',
    'The storage service did not confirm the last step. Ask a recipient whether the link works before sending again.',
  ],
  SESSION_FAILED: ['The Yivi session ended without a proof.', 'Start again when you are ready to scan.'],
  PKG_UNAVAILABLE: ['The key server (PKG) cannot be reached.', 'Check your connection, or try again in a moment.'],
  PKG_BAD_RESPONSE: ['The key server answered something unexpected.', undefined],
  RECIPIENT_UNKNOWN: ['This file is not for that recipient.', undefined],
  DECRYPTION_FAILED: ['The file could not be opened.', undefined],
  DOWNLOAD_FAILED: ['The file could not be fetched.', 'The link may be wrong or expired; check it and try again.'],
  BUNDLE_INVALID: [
    'The files inside cannot be listed.',
    'The bundle the sender made is damaged; use Save all instead.',
  ],
  NO_SERVICE_WORKER: [
    'Saving to disk is not available in this browser window.',
    'Use Save or Preview per file instead.',
  ],
  INPUT_FAILED: ['A file could not be read.', 'It may have been moved or changed while it was read. Pick it again.'],
  ABORTED: ['Stopped.', 'Nothing was sent.'],
  INVALID_STATE: ['This can no longer continue.', undefined],
};

/** The messages of an error and its causes, for recognising what the PKG said. */
function messages(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) parts.push(e.message);
  return parts.join(' | ');
}

/**
 * Whether a Yivi session ended because the wallet showed someone else's attributes: the PKG
 * refuses the key with proof status MISSING_ATTRIBUTES (a disclosure of another address).
 */
export const isWrongPerson = (error: unknown): boolean =>
  isClientError(error) && error.code === ClientErrorCode.SESSION_FAILED && /MISSING_ATTRIBUTES/.test(messages(error));

/**
 * The texts for a client error. `recipient`: whom the file is for (the one the page asked the Yivi
 * app for), so that the wrong person is told whom it is for rather than a proof status.
 */
export function describeClientError(error: unknown, recipient?: string): ErrorText {
  if (!isClientError(error)) return describeError(error);
  if (recipient !== undefined && isWrongPerson(error))
    return {
      title: `This file is for ${recipient}.`,
      hint: `The Yivi app showed another e-mail address, so no key was given. Open the link with the Yivi app that holds ${recipient}, or ask the sender to send the files to your own address.`,
      code: error.code,
    };
  const known = TEXTS[error.code];
  if (known === undefined) return { title: 'Something went wrong.', hint: error.message, code: error.code };
  return { title: known[0], hint: known[1] ?? error.message, code: error.code };
}

/** Shows a failure in an alert region, as dom.ts's showError does, with the client's texts. */
export function showClientError(region: HTMLElement, error: unknown, context?: string, recipient?: string): void {
  const text = describeClientError(error, recipient);
  const p = (className: string | undefined, content: string) => {
    const el = document.createElement('p');
    if (className !== undefined) el.className = className;
    el.textContent = content;
    return el;
  };
  region.replaceChildren(
    p('error-title', context === undefined ? text.title : `${context}: ${text.title}`),
    p(undefined, text.hint),
    // The client's own sentence says which request or file, for a support question.
    ...(isClientError(error) && error.message !== text.hint && !(recipient !== undefined && isWrongPerson(error))
      ? [p('error-detail', error.message)]
      : []),
    ...(text.code === undefined ? [] : [p('error-code', `Code: ${text.code}`)]),
  );
  region.dataset['code'] = text.code ?? '';
  region.hidden = false;
  region.focus();
}
