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

export function describeClientError(error: unknown): ErrorText {
  if (!isClientError(error)) return describeError(error);
  const known = TEXTS[error.code];
  if (known === undefined) return { title: 'Something went wrong.', hint: error.message, code: error.code };
  return { title: known[0], hint: known[1] ?? error.message, code: error.code };
}

/** Shows a failure in an alert region, as dom.ts's showError does, with the client's texts. */
export function showClientError(region: HTMLElement, error: unknown, context?: string): void {
  const text = describeClientError(error);
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
    ...(isClientError(error) && error.message !== text.hint ? [p('error-detail', error.message)] : []),
    ...(text.code === undefined ? [] : [p('error-code', `Code: ${text.code}`)]),
  );
  region.dataset['code'] = text.code ?? '';
  region.hidden = false;
  region.focus();
}
