import { sealStream, StreamUnsealer } from '../lib/index.js';
import type { CryptoEngine } from './engine.js';

/**
 * The library on this thread (Node, tests, a worker of the app's own). A module of its own, so
 * that nothing of the crypto library is in a page's bundle unless the page asks for it: the
 * client's default engine loads this module with a dynamic import only where no crypto worker can
 * start (engine.ts), and an app that imports `inlineEngine` gets it by its own choice.
 */
export const inlineEngine: CryptoEngine = { sealStream, StreamUnsealer };
