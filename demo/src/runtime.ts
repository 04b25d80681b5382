import { PkgClient, PostGuardWorker, registerDecryptingServiceWorker } from 'postguard-ts/worker';
import type { DemoRuntimeConfig } from '../vite.js';

/**
 * What the pages share: where the PKG, the wallet simulator and storage are (/config.json), the crypto
 * worker, the PKG client, and the service worker that streams downloads.
 */

export interface Services {
  config: DemoRuntimeConfig;
  pg: PostGuardWorker;
  pkg: PkgClient;
  /** Resolves true once the service worker controls the page; false where there is none. */
  serviceWorker: Promise<boolean>;
}

const FALLBACK: DemoRuntimeConfig = {
  pkgUrl: 'http://127.0.0.1:8080',
  walletUrl: 'http://127.0.0.1:8088/standin/wallet',
  cryptifyUrl: 'http://127.0.0.1:8090',
};

const stringOrNull = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** A config.json written before storage existed (no cryptifyUrl) still serves the encrypt and decrypt pages. */
function asConfig(value: unknown): DemoRuntimeConfig | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { pkgUrl, walletUrl, cryptifyUrl = null } = value as Record<string, unknown>;
  if (typeof pkgUrl !== 'string' || !stringOrNull(walletUrl) || !stringOrNull(cryptifyUrl)) return undefined;
  return { pkgUrl, walletUrl, cryptifyUrl };
}

async function loadConfig(): Promise<DemoRuntimeConfig> {
  try {
    const response = await fetch('./config.json', { cache: 'no-store' });
    const config = asConfig(response.ok ? await response.json() : undefined);
    if (config !== undefined) return config;
  } catch {
    // served without a config: the dev stack's addresses
  }
  return FALLBACK;
}

const SERVICE_WORKER_WAIT_MS = 10_000;

async function startServiceWorker(): Promise<boolean> {
  if (!('serviceWorker' in navigator)) return false;
  try {
    const registered = registerDecryptingServiceWorker('./sw.js').then(() => true);
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), SERVICE_WORKER_WAIT_MS));
    return await Promise.race([registered, timeout]);
  } catch (error) {
    console.warn('service worker unavailable; downloads are assembled in memory instead', error);
    return false;
  }
}

/** Where the decrypt page keeps which key protects remembered keys: 'device' or 'passkey'. */
export const TIER_SETTING = 'postguard-demo:remember-tier';

let services: Promise<Services> | undefined;

export function getServices(): Promise<Services> {
  services ??= (async () => {
    const config = await loadConfig();
    const serviceWorker = startServiceWorker();
    // The tier the user chose on the decrypt page, from the start: a change later forgets the keys.
    const keyProtection = localStorage.getItem(TIER_SETTING) === 'passkey' ? 'passkey' : 'device';
    const pkg = new PkgClient({ url: config.pkgUrl, keyProtection });
    return { config, pg: new PostGuardWorker(), pkg, serviceWorker };
  })();
  return services;
}
