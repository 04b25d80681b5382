import { installConsumerApi } from './page.js';

// esbuild does not follow `new Worker(new URL(...))`: both scripts were copied next to the page.
installConsumerApi('/postguard-sw.js', { workerUrl: '/postguard-crypto-worker.js' });
document.body.dataset['ready'] = 'true';
