import { MESSAGE_SAVES, type SavesReply, type TrackedSave } from './save-protocol.js';

/**
 * The page's side of the demo service worker's save tracker (save-tracker.ts): whether a save of
 * the upload `uuid` is running (a reload during "Save all"), and its progress until it ends.
 */

/** How long the service worker may take to answer; a page without one has no running save. */
const ANSWER_MS = 3000;

/**
 * The newest save of the upload `uuid` the service worker knows (null: none), then each change of
 * it to `onChange` while it runs.
 */
export function findSave(uuid: string, onChange: (save: TrackedSave) => void): Promise<TrackedSave | null> {
  const worker = navigator.serviceWorker?.controller;
  if (worker === null || worker === undefined) return Promise.resolve(null);
  const channel = new MessageChannel();
  return new Promise((resolve) => {
    let answered = false;
    const timer = setTimeout(() => {
      channel.port1.close();
      resolve(null);
    }, ANSWER_MS);
    channel.port1.onmessage = ({ data }: MessageEvent<SavesReply>) => {
      if (data?.type !== 'save') return;
      if (answered) {
        if (data.save !== null) onChange(data.save);
        return;
      }
      answered = true;
      clearTimeout(timer);
      resolve(data.save);
    };
    worker.postMessage({ type: MESSAGE_SAVES, source: `/filedownload/${uuid}` }, [channel.port2]);
  });
}
