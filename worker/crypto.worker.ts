/// <reference lib="webworker" />
import { expose } from 'comlink';
import { loadShake128 } from '#shake';
import { cryptoWorkerApi } from './worker-api.js';

/** The crypto worker's entry: serves worker-api.ts to the page that started it (client.ts). */

// Start compiling the WebAssembly Keccak now, not on the first seal.
void loadShake128();
expose(cryptoWorkerApi());
