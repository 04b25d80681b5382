import { PkgClient, PostGuardWorker, registerDecryptingServiceWorker } from 'postguard-ts/worker';
import type { DemoRuntimeConfig } from '../vite.js';

/**
 * What both pages share: where the PKG and the wallet simulator are (/config.json), the crypto
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
};

function isConfig(value: unknown): value is DemoRuntimeConfig {
  if (typeof value !== 'object' || value === null) return false;
  const { pkgUrl, walletUrl } = value as Record<string, unknown>;
  return typeof pkgUrl === 'string' && (walletUrl === null || typeof walletUrl === 'string');
}

async function loadConfig(): Promise<DemoRuntimeConfig> {
  try {
    const response = await fetch('./config.json', { cache: 'no-store' });
    const body: unknown = response.ok ? await response.json() : undefined;
    if (isConfig(body)) return body;
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

let services: Promise<Services> | undefined;

export function getServices(): Promise<Services> {
  services ??= (async () => {
    const config = await loadConfig();
    const serviceWorker = startServiceWorker();
    return { config, pg: new PostGuardWorker(), pkg: new PkgClient({ url: config.pkgUrl }), serviceWorker };
  })();
  return services;
}
