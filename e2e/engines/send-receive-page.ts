/**
 * What the send/receive spec does in the demo's pages, as page-side code installed with
 * `tab.evaluate(installSendReceive)` (the same on every engine): fill the forms, pick files, press
 * buttons, and read the state the pages expose (data-* attributes and visible text).
 */

export interface FileSpec {
  name: string;
  /** The bytes, base64 (from Node, to compare with what arrives). */
  b64?: string;
  /** Or that many zero bytes, made in the page (a large file that never needs to cross). */
  zeros?: number;
}

/** Installs window.sr. Runs in the page: only what is inside the function is there. */
export function installSendReceive(): void {
  const visible = (el: Element | null): boolean =>
    el !== null && el.getClientRects().length > 0 && !el.closest('[hidden]');
  const q = <T extends Element = HTMLElement>(selector: string): T => {
    const el = document.querySelector<T>(selector);
    if (el === null) throw new Error(`nothing matches ${selector}`);
    return el;
  };
  const w = window as unknown as { srSessions?: number };
  // Counts every Yivi session the client draws, however briefly it stays.
  w.srSessions = document.querySelectorAll('.postguard-session').length;
  new MutationObserver((records) => {
    for (const r of records)
      for (const n of Array.from(r.addedNodes))
        if (n instanceof Element && (n.matches('.postguard-session') || n.querySelector('.postguard-session')))
          w.srSessions! += 1;
  }).observe(document.body, { childList: true, subtree: true });
  const sr = {
    fill(selector: string, value: string) {
      const el = q<HTMLInputElement>(selector);
      el.value = value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    },
    setFiles(selector: string, files: Array<{ name: string; b64?: string; zeros?: number }>) {
      const transfer = new DataTransfer();
      for (const f of files) {
        const bytes =
          f.b64 !== undefined ? Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0)) : new Uint8Array(f.zeros ?? 0);
        transfer.items.add(new File([bytes], f.name, { type: 'application/octet-stream' }));
      }
      const input = q<HTMLInputElement>(selector);
      input.files = transfer.files;
      input.dispatchEvent(new Event('change', { bubbles: true }));
    },
    click(selector: string) {
      const el = q<HTMLElement>(selector);
      if (!visible(el)) throw new Error(`${selector} is not visible`);
      el.click();
    },
    shown: (selector: string) => visible(document.querySelector(selector)),
    text: (selector: string) => document.querySelector<HTMLElement>(selector)?.innerText ?? '',
    data: (selector: string, key: string) => document.querySelector<HTMLElement>(selector)?.dataset[key] ?? null,
    href: (selector: string) => document.querySelector<HTMLAnchorElement>(selector)?.href ?? null,
    sessionLink: () => {
      const a = document.querySelector<HTMLAnchorElement>('.postguard-session-link');
      return a !== null && visible(a) ? a.href : undefined;
    },
    sessions: () => w.srSessions ?? 0,
    /** What the uploads keeper holds in this origin: OPFS files of its folder, IndexedDB keys of its store. */
    async kept() {
      const files: string[] = [];
      try {
        const root = await navigator.storage.getDirectory();
        const dir = await root.getDirectoryHandle('postguard-uploads');
        for await (const name of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) files.push(name);
      } catch {
        // no folder: nothing kept there
      }
      const keys = await new Promise<string[]>((resolve, reject) => {
        const request = indexedDB.open('postguard-uploads');
        // No database yet: nothing kept, and none is made here (that would be one without the store).
        let fresh = false;
        request.onupgradeneeded = () => {
          fresh = true;
          request.transaction?.abort();
        };
        request.onerror = () => (fresh ? resolve([]) : reject(request.error));
        request.onsuccess = () => {
          const db = request.result;
          if (!db.objectStoreNames.contains('uploads')) {
            db.close();
            return resolve([]);
          }
          const all = db.transaction('uploads', 'readonly').objectStore('uploads').getAllKeys();
          all.onerror = () => reject(all.error);
          all.onsuccess = () => {
            db.close();
            // The device's wrapping key for recovery tokens (non-extractable, shared by every kept
            // upload, docs/security.md "Keys at rest") is no part of any upload.
            resolve(all.result.map(String).filter((k) => !k.startsWith('probe') && k !== 'pg|device-key'));
          };
        };
      });
      return { files: files.filter((f) => f !== '.probe'), keys };
    },
    /** What a person would notice first: content wider than the screen, controls without a label. */
    layoutProblems() {
      const overflow = document.documentElement.scrollWidth - window.innerWidth;
      const unlabelled = Array.from(document.querySelectorAll<HTMLInputElement>('input, select, textarea'))
        .filter((el) => el.type !== 'hidden' && visible(el))
        .filter((el) => (el.labels?.length ?? 0) === 0 && !el.getAttribute('aria-label'))
        .map((el) => el.outerHTML);
      return { overflow, unlabelled };
    },
  };
  (window as unknown as { sr: typeof sr }).sr = sr;
}

export interface SendReceivePage {
  fill(selector: string, value: string): void;
  setFiles(selector: string, files: FileSpec[]): void;
  click(selector: string): void;
  shown(selector: string): boolean;
  text(selector: string): string;
  data(selector: string, key: string): string | null;
  href(selector: string): string | null;
  sessionLink(): string | undefined;
  sessions(): number;
  kept(): Promise<{ files: string[]; keys: string[] }>;
  layoutProblems(): { overflow: number; unlabelled: string[] };
}
