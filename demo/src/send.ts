import type { LostUpload, PendingUpload, PostGuard, Sealed, StorageLimits } from 'postguard-ts/client';
import { parseRecipients, parseSender } from './addresses.js';
import { getClient } from './client.js';
import { showClientError } from './client-messages.js';
import { byId, h, setStatus } from './dom.js';
import { formatBytes } from './files.js';
import { receiveLink } from './links.js';
import { ProgressView } from './progress.js';
import { holdWhile, ifUnclaimed } from './upload-lock.js';
import { YiviSlot } from './yivi-slot.js';

/**
 * The send page: files, recipients' addresses, the sender's address and a message. Before any QR
 * it shows the exact encrypted size and the storage service's limit (the client refuses an
 * over-limit upload before the scan, too); then the sender proves their address with Yivi, the
 * files are sealed into the browser's storage and uploaded in chunks as they are sealed (two bars:
 * encrypting, uploading). A reload or a crash once encrypting is done leaves the upload unfinished:
 * this page continues it on its next load, from where the service stopped. A reload while
 * encrypting loses the send (the encrypted bytes cannot be made again without the files, which a
 * reloaded page no longer has): the next load says so plainly and offers to start again.
 */

const form = byId<HTMLFormElement>('send-form');
const filesInput = byId<HTMLInputElement>('files');
const recipientsInput = byId<HTMLTextAreaElement>('recipients');
const senderInput = byId<HTMLInputElement>('sender-email');
const messageInput = byId<HTMLTextAreaElement>('message');
const estimate = byId('estimate');
const button = byId<HTMLButtonElement>('send-button');
const progressSlot = byId('progress-slot');
const resumeSlot = byId('resume-slot');
const errorRegion = byId('error');
const result = byId('result');

const ready = getClient();
let busy = false;

/** Marks a field wrong (or right again) with its note. */
function problem(input: HTMLElement, id: string, text: string | undefined): void {
  const note = byId(id);
  note.textContent = text ?? '';
  note.hidden = text === undefined;
  if (text === undefined) input.removeAttribute('aria-invalid');
  else input.setAttribute('aria-invalid', 'true');
}

interface Draft {
  files: File[];
  recipients: string[];
  sender: string;
}

/** The form as a draft, or undefined after pointing at what is missing. */
function readForm(): Draft | undefined {
  const files = Array.from(filesInput.files ?? []);
  const recipients = parseRecipients(recipientsInput.value);
  const sender = parseSender(senderInput.value);
  problem(filesInput, 'files-problem', files.length === 0 ? 'Pick at least one file.' : undefined);
  problem(recipientsInput, 'recipients-problem', recipients.ok ? undefined : recipients.problem);
  problem(senderInput, 'sender-problem', sender.ok ? undefined : sender.problem);
  const first = [files.length === 0 && filesInput, !recipients.ok && recipientsInput, !sender.ok && senderInput].find(
    (el): el is HTMLInputElement | HTMLTextAreaElement => el !== false,
  );
  if (first !== undefined || !recipients.ok || !sender.ok) {
    first?.focus();
    return undefined;
  }
  return { files, recipients: recipients.addresses, sender: sender.address };
}

function seal(pg: PostGuard, draft: Draft, qr: HTMLElement): Sealed {
  return pg.encrypt({
    files: draft.files,
    recipients: draft.recipients.map((a) => pg.recipient.email(a)),
    sign: pg.sign.yivi({ element: qr, senderEmail: draft.sender }),
  });
}

/** "Encrypted: 1.0 MiB (1 048 913 bytes). The storage service takes up to 5.0 GB per upload." */
function showEstimate(size: number | undefined, limits: StorageLimits | undefined): void {
  const parts = [
    size === undefined
      ? 'Encrypted size: not known in advance.'
      : `Encrypted size: ${formatBytes(size)} (${size} bytes).`,
    limits === undefined
      ? 'The storage service does not say its limit.'
      : `The storage service takes up to ${formatBytes(limits.perUploadLimitBytes)} (${limits.perUploadLimitBytes} bytes) per upload.`,
  ];
  setStatus(estimate, parts.join(' '));
  estimate.dataset['size'] = size === undefined ? '' : String(size);
  estimate.dataset['limit'] = limits === undefined ? '' : String(limits.perUploadLimitBytes);
}

/** The size and limit as soon as the form says enough, before anyone presses Send. */
async function refreshEstimate(): Promise<void> {
  const files = Array.from(filesInput.files ?? []);
  const recipients = parseRecipients(recipientsInput.value);
  const sender = parseSender(senderInput.value);
  byId('file-list').replaceChildren(...files.map((f) => h('li', {}, `${f.name} (${formatBytes(f.size)})`)));
  if (files.length === 0 || !recipients.ok || !sender.ok) return;
  const { client } = await ready;
  const draft = { files, recipients: recipients.addresses, sender: sender.address };
  // Only sizes are asked here: no session starts, so the QR target is a detached element.
  const [size, limits] = await Promise.all([
    seal(client, draft, document.createElement('div')).size(),
    client.limits(),
  ]);
  showEstimate(size, limits);
}

function onFormChange(): void {
  refreshEstimate().catch(() => undefined);
}
filesInput.addEventListener('change', onFormChange);
recipientsInput.addEventListener('change', onFormChange);
senderInput.addEventListener('change', onFormChange);

/** A bar in the progress slot: alone (`replace`), or beside the ones there. */
function progressView(label: string, replace = true): ProgressView {
  const view = new ProgressView(label);
  if (replace) progressSlot.replaceChildren(view.el);
  else progressSlot.append(view.el);
  return view;
}

/** Counted on the slot as well as drawn, so a reader (and the end-to-end test) sees the bytes. */
function reportProgress(view: ProgressView, sent: number, total: number | undefined): void {
  view.set(sent, total);
  progressSlot.dataset['sent'] = String(sent);
  progressSlot.dataset['total'] = total === undefined ? '' : String(total);
}

/** The sealing's bar, counted on the slot too (`data-sealed`). */
function reportSealing(view: ProgressView, sealed: number, total: number | undefined): void {
  view.set(sealed, total);
  progressSlot.dataset['sealed'] = String(sealed);
  progressSlot.dataset['sealTotal'] = total === undefined ? '' : String(total);
}

function showLink(uuid: string, recipients: readonly string[], what: string): void {
  const href = receiveLink(location.href, uuid, recipients[0]);
  result.replaceChildren(
    h('p', {}, h('strong', {}, what)),
    h('p', {}, `The recipients (${recipients.join(', ')}) were e-mailed a link. This is the first one's:`),
    h('p', {}, h('a', { href, id: 'receive-link' }, href)),
  );
  result.dataset['outcome'] = 'sent';
  result.dataset['uuid'] = uuid;
  result.hidden = false;
}

async function send(): Promise<void> {
  errorRegion.hidden = true;
  result.hidden = true;
  const draft = readForm();
  if (draft === undefined) return;
  busy = true;
  button.disabled = true;
  const { client, config } = await ready;
  const slot = new YiviSlot(
    'Prove your e-mail address',
    `Scan with the Yivi app to sign as ${draft.sender}. Recipients will see this as the sender.`,
    config.walletUrl,
  );
  byId('session-slot').replaceChildren(slot.el);
  const sealed = seal(client, draft, slot.target);
  let view: ProgressView | undefined;
  let sealing: ProgressView | undefined;
  try {
    // Shown before the QR: the exact size and the limit it must fit.
    const [size, limits] = await Promise.all([sealed.size(), client.limits()]);
    showEstimate(size, limits);
    const upload = sealed.upload({
      notify: { recipients: true, message: messageInput.value, language: 'EN' },
      label: draft.files.map((f) => f.name).join(', '),
      onUploadInit: ({ uuid }) => {
        holdWhile(uuid, upload);
        sealing = progressView('Encrypting');
        view = progressView('Uploading', false);
      },
      onSealProgress: (done, total) => {
        if (sealing === undefined) return;
        reportSealing(sealing, done, total);
        if (done === total) sealing.finish('Encrypted');
      },
      onProgress: (sent, total) => {
        view ??= progressView('Uploading', false);
        reportProgress(view, sent, total);
      },
    });
    const { uuid } = await upload;
    sealing?.finish('Encrypted');
    view?.finish('Uploaded');
    showLink(uuid, draft.recipients, 'Sent.');
  } catch (error) {
    if (sealing !== undefined && sealing.el.dataset['state'] === undefined) sealing.fail('Stopped');
    view?.fail('Stopped');
    showClientError(errorRegion, error, 'Not sent');
  } finally {
    busy = false;
    button.disabled = false;
  }
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  if (!busy) void send();
});

/** Continues what an earlier visit left unfinished, one upload at a time, saying so. */
async function resumeLeftovers(pending: readonly PendingUpload[]): Promise<void> {
  for (const upload of pending) {
    const notice = h(
      'p',
      { class: 'notice', 'data-uuid': upload.uuid },
      `Continuing an unfinished upload from ${upload.createdAt.toLocaleString()}: ${upload.label ?? 'files'} to ${upload.recipients.join(', ')}.`,
    );
    resumeSlot.append(notice);
    const view = progressView('Continuing the upload');
    try {
      const done = await ifUnclaimed(upload.uuid, () =>
        upload.resume({ onProgress: (sent, total) => reportProgress(view, sent, total) }),
      );
      if (done === undefined) {
        notice.textContent += ' Another tab is sending it.';
        view.cancel('In another tab');
        continue;
      }
      view.finish('Uploaded');
      notice.textContent += ' Done.';
      showLink(done.uuid, upload.recipients, 'Sent (continued after a reload).');
    } catch (error) {
      view.fail('Stopped');
      showClientError(errorRegion, error, 'The unfinished upload could not continue');
    }
  }
}

/** The form filled again from a lost send, the files left for the person to pick. */
function startAgain(lost: LostUpload): void {
  recipientsInput.value = lost.recipients.join(', ');
  messageInput.value = lost.message ?? '';
  filesInput.focus();
}

/** Says which sends a reload cut off while they were encrypted, and offers to start each again. */
function reportLost(lost: readonly LostUpload[]): void {
  for (const send of lost) {
    const again = h('button', { type: 'button', class: 'start-again' }, 'Start again');
    again.addEventListener('click', () => startAgain(send));
    resumeSlot.append(
      h(
        'div',
        { class: 'notice lost', role: 'status' },
        h(
          'p',
          {},
          `A send was lost: the page was reloaded or closed while ${send.label ?? 'the files'} (to ${send.recipients.join(', ')}, started ${send.createdAt.toLocaleString()}) was being encrypted. Nothing was sent to anyone, and nothing of it is kept in this browser. To send it, pick the files again.`,
        ),
        again,
      ),
    );
  }
}

void ready.then(
  async ({ client, config, serviceWorker }) => {
    const link = byId<HTMLAnchorElement>('wallet-link');
    if (config.walletUrl !== null) {
      link.href = config.walletUrl;
      link.hidden = false;
    }
    const lost = await client.lostUploads().catch(() => []);
    reportLost(lost);
    const pending = await client.resumeUploads().catch(() => []);
    document.body.dataset['lost'] = String(lost.length);
    document.body.dataset['serviceWorker'] = String(await serviceWorker);
    document.body.dataset['pending'] = String(pending.length);
    document.body.dataset['ready'] = 'true';
    await resumeLeftovers(pending);
  },
  (error: unknown) => showClientError(errorRegion, error, 'The page cannot start'),
);
