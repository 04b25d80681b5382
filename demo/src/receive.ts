import { senderReport, type SenderReport, type VerificationResult } from 'postguard-ts';
import type { BundleEntry, InspectResult, Opened } from 'postguard-ts/client';
import { getClient } from './client.js';
import { showClientError } from './client-messages.js';
import { byId, h } from './dom.js';
import { PREVIEW_LIMIT, contentTypeFor, formatBytes, previewKind } from './files.js';
import { parseReceiveLink } from './links.js';
import { ProgressView } from './progress.js';
import { findSave } from './running-save.js';
import { saveStream } from './save.js';
import type { TrackedSave } from './save-protocol.js';
import { senderView } from './sender-view.js';
import { YiviSlot } from './yivi-slot.js';

/**
 * The receive page, opened from the link the sender's upload mailed (receive.html?uuid=…, or
 * Cryptify's /download?uuid=…): the file's header names its recipients and the sender it claims;
 * the recipient proves their address with Yivi, then lists the files and saves or previews each
 * alone (only that file's part of the ciphertext is fetched), or saves the whole bundle through
 * the service worker, straight to disk. The sender reads "verified" only after such a full read.
 * A reload while "Save all" runs finds that save still running (the service worker keeps it going,
 * save-tracker.ts) and shows it; Save all waits for it, so a second click never writes a second copy.
 */

const bundleSection = byId('bundle');
const filesSection = byId('files');
const entryList = byId('entry-list');
const choices = byId('recipient-choices');
const senderRegion = byId('sender');
const verifiedRegion = byId('verified');
const progressSlot = byId('progress-slot');
const previewArea = byId('preview-area');
const errorRegion = byId('error');
const openButton = byId<HTMLButtonElement>('open-button');
const saveAllButton = byId<HTMLButtonElement>('save-all');
const runningRegion = byId('running-save');

const ready = getClient();
let previewUrl: string | undefined;
/** A full read verified the sender: that one statement stands alone from then on. */
let senderVerified = false;
/** A save of this file is running (started here, or before a reload): Save all waits. */
let saveRunning = false;

/** The verified sender of a finished save, in `region`; the claim shown before it goes. */
function showSaved(region: HTMLElement, sender: SenderReport): void {
  region.replaceChildren(h('p', {}, h('strong', {}, 'Saved: every byte authenticated.')), senderView(sender));
  region.dataset['outcome'] = 'saved';
  region.dataset['standing'] = sender.standing;
  region.hidden = false;
  senderVerified = true;
  senderRegion.replaceChildren();
  senderRegion.hidden = true;
}

function setSaveRunning(on: boolean): void {
  saveRunning = on;
  saveAllButton.disabled = on;
}

/**
 * A save of this file that the service worker is still running, started by this page before a
 * reload: its progress, then its outcome. Save all stays off until it ends.
 */
function showRunningSave(first: TrackedSave): (save: TrackedSave) => void {
  const view = new ProgressView('Saving (started before this page was loaded)');
  const note = h(
    'p',
    { class: 'note' },
    `${first.filename} is still being saved by your browser: it continues in its downloads. Save all is off until it ends.`,
  );
  runningRegion.replaceChildren(view.el, note);
  runningRegion.dataset['state'] = 'running';
  runningRegion.hidden = false;
  setSaveRunning(true);
  const update = (save: TrackedSave) => {
    if (save.state === 'done') {
      view.finish('Saved');
      note.remove();
      runningRegion.dataset['state'] = 'done';
      const result = save.result as VerificationResult | undefined;
      if (result !== undefined) {
        const report = h('div', {});
        runningRegion.append(report);
        showSaved(report, senderReport(result));
      }
      setSaveRunning(false);
    } else if (save.state === 'failed') {
      view.fail('Stopped: do not use a partial file');
      note.textContent = `The save stopped (${save.error ?? 'no reason given'}). Save all again to save the files.`;
      runningRegion.dataset['state'] = 'failed';
      setSaveRunning(false);
    } else {
      view.set(save.bytes);
    }
  };
  update(first);
  return update;
}

function clearError(): void {
  errorRegion.hidden = true;
}

function chosenRecipient(): string | undefined {
  return choices.querySelector<HTMLInputElement>('input[name=recipient]:checked')?.value;
}

function showHeader(inspected: InspectResult, hinted: string | undefined): void {
  byId('recipient-list').replaceChildren(...inspected.recipients.map((r) => h('li', {}, r)));
  senderRegion.replaceChildren(senderView(inspected.sender));
  const preselect = hinted !== undefined && inspected.recipients.includes(hinted) ? hinted : inspected.recipients[0];
  choices.replaceChildren(
    ...inspected.recipients.map((id) =>
      h(
        'label',
        {},
        h('input', { type: 'radio', name: 'recipient', value: id, checked: id === preselect || undefined }),
        ` ${id}`,
      ),
    ),
  );
  bundleSection.hidden = false;
}

function clearPreview(): void {
  if (previewUrl !== undefined) URL.revokeObjectURL(previewUrl);
  previewUrl = undefined;
  previewArea.replaceChildren();
  previewArea.hidden = true;
}

/** Small files only: the preview holds the file in memory, which saving never does. */
async function preview(entry: BundleEntry): Promise<void> {
  clearPreview();
  const type = contentTypeFor(entry.name);
  const kind = previewKind(type);
  const blob = await entry.blob(type);
  if (kind === 'text') {
    previewArea.append(h('pre', {}, await blob.text()));
  } else {
    previewUrl = URL.createObjectURL(blob);
    previewArea.append(
      kind === 'image'
        ? h('img', { src: previewUrl, alt: `Preview of ${entry.name}` })
        : h('iframe', { src: previewUrl, title: `Preview of ${entry.name}` }),
    );
  }
  previewArea.dataset['entry'] = entry.name;
  previewArea.hidden = false;
}

/** One file of the bundle to disk: its stream, CRC-checked, through the demo's saver. */
async function saveEntry(entry: BundleEntry, row: HTMLElement): Promise<void> {
  row.dataset['state'] = 'saving';
  // A download: its type only tells the browser to save it (the saver takes a bare media type).
  const target = await saveStream(entry.name, { contentType: 'application/octet-stream' });
  await entry.stream().pipeTo(target.writable);
  await target.done;
  row.dataset['state'] = 'saved';
}

function entryRow(entry: BundleEntry): HTMLElement {
  const row = h(
    'li',
    { 'data-entry': entry.name },
    h('span', { class: 'entry-name' }, entry.name),
    ` ${formatBytes(entry.size)} `,
  );
  const act = (work: () => Promise<void>) => () => {
    clearError();
    work().catch((error: unknown) => {
      row.dataset['state'] = 'failed';
      showClientError(errorRegion, error, entry.name);
    });
  };
  row.append(
    h(
      'button',
      {
        type: 'button',
        class: 'secondary save',
        'aria-label': `Save ${entry.name}`,
        onclick: act(() => saveEntry(entry, row)),
      },
      'Save',
    ),
  );
  if (entry.size <= PREVIEW_LIMIT && previewKind(contentTypeFor(entry.name)) !== undefined) {
    row.append(
      h(
        'button',
        {
          type: 'button',
          class: 'secondary preview',
          'aria-label': `Preview ${entry.name}`,
          onclick: act(() => preview(entry)),
        },
        'Preview',
      ),
    );
  }
  return row;
}

async function openFiles(opened: Opened, slot: YiviSlot): Promise<void> {
  clearError();
  const recipient = chosenRecipient();
  openButton.disabled = true;
  try {
    const result = await opened.decrypt({
      output: 'entries',
      element: slot.target,
      enableCache: true,
      ...(recipient === undefined ? {} : { recipient }),
    });
    if (result.output !== 'entries') return;
    entryList.replaceChildren(...result.entries.map(entryRow));
    // What a part proves: every span authenticated, the sender's signatures not (yet) checked. Once
    // Save all verified the sender, that one statement stands alone (no claim beside it).
    if (!senderVerified) senderRegion.replaceChildren(senderView(result.sender));
    filesSection.hidden = false;
    filesSection.dataset['count'] = String(result.entries.length);
  } catch (error) {
    showClientError(errorRegion, error, 'Not opened', recipient ?? chosenRecipient());
  } finally {
    openButton.disabled = false;
  }
}

async function saveAll(opened: Opened, slot: YiviSlot): Promise<void> {
  if (saveRunning) return;
  clearError();
  const recipient = chosenRecipient();
  setSaveRunning(true);
  const view = new ProgressView('Saving');
  progressSlot.replaceChildren(view.el);
  verifiedRegion.hidden = true;
  try {
    const result = await opened.decrypt({
      output: 'save',
      element: slot.target,
      enableCache: true,
      filename: 'postguard-files.zip',
      onProgress: (bytes) => view.set(bytes),
      ...(recipient === undefined ? {} : { recipient }),
    });
    if (result.output !== 'save') return;
    view.finish('Saved');
    // One sender statement on the page: the verified one replaces the claim shown before the save.
    showSaved(verifiedRegion, result.sender);
  } catch (error) {
    view.fail('Failed: do not use a partial file');
    showClientError(errorRegion, error, 'Not saved', recipient ?? chosenRecipient());
  } finally {
    setSaveRunning(false);
  }
}

function askForLink(): void {
  const form = byId<HTMLFormElement>('link-form');
  const input = byId<HTMLInputElement>('link');
  form.hidden = false;
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const link = parseReceiveLink(input.value, location.href);
    const note = byId('link-problem');
    note.hidden = link !== undefined;
    note.textContent = link === undefined ? 'That is not a PostGuard link: it should carry ?uuid=…' : '';
    if (link === undefined) {
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    const next = new URL('receive.html', location.href);
    next.searchParams.set('uuid', link.uuid);
    if (link.recipient !== undefined) next.searchParams.set('recipient', link.recipient);
    location.assign(next.href);
  });
}

void ready.then(
  async ({ client, config, serviceWorker }) => {
    const wallet = byId<HTMLAnchorElement>('wallet-link');
    if (config.walletUrl !== null) {
      wallet.href = config.walletUrl;
      wallet.hidden = false;
    }
    document.body.dataset['serviceWorker'] = String(await serviceWorker);
    document.body.dataset['ready'] = 'true';
    const link = parseReceiveLink(location.href);
    if (link === undefined) return askForLink();
    const slot = new YiviSlot(
      'Prove who you are',
      'Scan with the Yivi app to prove you are this recipient.',
      config.walletUrl,
    );
    byId('session-slot').replaceChildren(slot.el);
    const opened = client.open({ uuid: link.uuid });
    byId<HTMLFormElement>('open-form').addEventListener('submit', (event) => {
      event.preventDefault();
      void openFiles(opened, slot);
    });
    saveAllButton.addEventListener('click', () => void saveAll(opened, slot));
    try {
      showHeader(await opened.inspect(), link.recipient);
    } catch (error) {
      showClientError(errorRegion, error, 'The link does not open');
    }
    // A reload during Save all: the save goes on in the service worker; show it rather than lose it.
    let update: ((save: TrackedSave) => void) | undefined;
    let latest: TrackedSave | undefined;
    const running = await findSave(link.uuid, (save) => {
      latest = save;
      update?.(save);
    });
    if (
      running !== null &&
      (running.state === 'waiting' || running.state === 'verifying' || running.state === 'saving')
    ) {
      update = showRunningSave(running);
      if (latest !== undefined) update(latest);
    }
    document.body.dataset['runningSave'] = update === undefined ? '0' : '1';
  },
  (error: unknown) => showClientError(errorRegion, error, 'The page cannot start'),
);
