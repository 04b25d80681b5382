import { parentPort, workerData } from 'node:worker_threads';
import { typeCheck, type Block } from './readme-examples.js';

/** test/readme-examples.ts typeCheckOnThread: the README blocks' type check, off the test's thread. */
parentPort!.postMessage(typeCheck(workerData as Block[]));
