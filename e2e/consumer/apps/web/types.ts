// Every browser entry's types, in a strict consumer: skipLibCheck false, lib ES2022 + DOM only.
import { seal, sealStream, Unsealer, StreamUnsealer, PostGuardError, ErrorCode } from 'postguard-ts';
import { PkgClient, IdentitySession, qrSvg } from 'postguard-ts/pkg';
import { PostGuardWorker } from 'postguard-ts/worker';
import { prepareDownload, registerDecryptingServiceWorker, triggerDownload } from 'postguard-ts/sw';
import { parsePreamble } from 'postguard-ts/format';
import {
  PostGuardWorker as ReadyBuiltWorker,
  PkgClient as ReadyBuiltPkgClient,
  senderReport,
} from 'postguard-ts/browser';

export const entries = [
  seal,
  sealStream,
  Unsealer,
  StreamUnsealer,
  PostGuardError,
  ErrorCode,
  PkgClient,
  IdentitySession,
  qrSvg,
];
export const browser = [
  PostGuardWorker,
  prepareDownload,
  registerDecryptingServiceWorker,
  triggerDownload,
  parsePreamble,
];
export const readyBuilt = [ReadyBuiltWorker, ReadyBuiltPkgClient, senderReport];
