import type { BundleEntry, InspectResult, Opened } from 'postguard-ts/client';
import { getClient } from './client.js';
import { showClientError } from './client-messages.js';
import { byId, h } from './dom.js';
import { PREVIEW_LIMIT, contentTypeFor, formatBytes, previewKind } from './files.js';
import { parseReceiveLink } from './links.js';
import { ProgressView } from './progress.js';
import { saveStream } from './save.js';
import { senderView } from './sender-view.js';
import { YiviSlot } from './yivi-slot.js';

/**
 * The receive page, opened from the link the sender's upload mailed (receive.html?uuid=…, or
 * Cryptify's /download?uuid=…): the file's header names its recipients and the sender it claims;
 * the recipient proves their address with Yivi, then lists the files and saves or previews each
 * alone (only that file's part of the ciphertext is fetched), or saves the whole bundle through
 * the service worker, straight to disk. The sender reads "verified" only after such a full read.
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

const ready = getClient();
let previewUrl: string | undefined;

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
    if (verifiedRegion.dataset['outcome'] !== 'saved') senderRegion.replaceChildren(senderView(result.sender));
    filesSection.hidden = false;
    filesSection.dataset['count'] = String(result.entries.length);
  } catch (error) {
    showClientError(errorRegion, error, 'Not opened', recipient ?? chosenRecipient());
  } finally {
    openButton.disabled = false;
  }
}

async function saveAll(opened: Opened, slot: YiviSlot): Promise<void> {
  clearError();
  const recipient = chosenRecipient();
  saveAllButton.disabled = true;
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
    verifiedRegion.replaceChildren(
      h('p', {}, h('strong', {}, 'Saved: every byte authenticated.')),
      senderView(result.sender),
    );
    verifiedRegion.dataset['outcome'] = 'saved';
    verifiedRegion.dataset['standing'] = result.sender.standing;
    verifiedRegion.hidden = false;
    // One sender statement on the page: the verified one replaces the claim shown before the save.
    senderRegion.replaceChildren();
    senderRegion.hidden = true;
  } catch (error) {
    view.fail('Failed: do not use a partial file');
    showClientError(errorRegion, error, 'Not saved', recipient ?? chosenRecipient());
  } finally {
    saveAllButton.disabled = false;
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
  },
  (error: unknown) => showClientError(errorRegion, error, 'The page cannot start'),
);
