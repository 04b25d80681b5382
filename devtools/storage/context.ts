import type { Faults } from './faults.js';
import type { Outbox } from './outbox.js';
import type { SessionStore } from './sessions.js';
import type { StorageSettings } from './settings.js';
import type { UsageLedger } from './usage.js';

/** What the routes share. `dataDir` and `verifyingKey` are settled when the server becomes ready. */
export interface StorageContext {
  readonly settings: StorageSettings;
  readonly store: SessionStore;
  readonly usage: UsageLedger;
  readonly outbox: Outbox;
  readonly faults: Faults;
  dataDir: string;
  verifyingKey: string | undefined;
}
