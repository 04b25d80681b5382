import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { expect } from '@playwright/test';
import { sealStream, type SealOptions } from '../../lib/index.js';
import { chunkedSource, collector } from '../../test/streams.js';

/**
 * A small real video for the seeking tests, made at test time (no media file is committed): 10 s
 * of VP8 in WebM (every engine here plays it: Chromium, Firefox, WebKitGTK through GStreamer),
 * a keyframe every second and noise so that it is ~2.4 MB, about nine 256 KiB segments. ffmpeg
 * writes its cues (the seek index) at the end, so a player must ask for the end of the file too.
 * Throws when ffmpeg is missing (apt-get install -y ffmpeg; .ci/run installs it).
 */
export async function makeVideo(seconds = 10): Promise<Uint8Array> {
  const dir = await mkdtemp(join(tmpdir(), 'pg-video-'));
  const out = join(dir, 'clip.webm');
  try {
    await promisify(execFile)('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-y',
      '-f',
      'lavfi',
      '-i',
      'testsrc2=size=320x240:rate=25,noise=alls=30:allf=t+u',
      '-t',
      String(seconds),
      '-c:v',
      'libvpx',
      '-deadline',
      'realtime',
      '-cpu-used',
      '8',
      '-b:v',
      '2M',
      '-minrate',
      '2M',
      '-maxrate',
      '2M',
      '-g',
      '25',
      '-an',
      out,
    ]);
    return new Uint8Array(await readFile(out));
  } catch (error) {
    // A missing ffmpeg fails the test rather than skipping it: a seek test that quietly does not run
    // would pass with seeking broken.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('ffmpeg is not installed: apt-get install -y ffmpeg (.ci/run installs it)');
    }
    throw error;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `plain` sealed as a stream (what the service worker decrypts). */
export async function sealForStream(mpk: string, options: SealOptions, plain: Uint8Array): Promise<Uint8Array> {
  const out = collector();
  await sealStream(mpk, options, chunkedSource(plain), out.writable);
  return out.bytes();
}

/** What the test app's swVideoSeek reports (worker/test/app/main.ts). */
export interface VideoSeekResult {
  duration: number;
  seekableEnd: number;
  currentTime: number;
  readyState: number;
  ranges: Array<{ start: number; total: number; verified: string; claimedSender: unknown }>;
  probe: Record<string, unknown>;
}

/**
 * What every engine must show after seeking a 10 s clip to 7 s: it knew it could seek to the end,
 * got there with a frame, every range it was served is labelled as authenticated per segment with
 * the claimed sender, and a Range fetch from `probeAt` is the exact 206 of those bytes.
 */
export function expectSeekResult(r: VideoSeekResult, clip: Uint8Array, probeAt: number, sender: unknown): void {
  expect(r.duration).toBeCloseTo(10, 0);
  expect(r.seekableEnd).toBeCloseTo(r.duration, 0);
  expect(r.currentTime).toBeCloseTo(7, 0);
  expect(r.readyState).toBeGreaterThanOrEqual(2);
  for (const x of r.ranges) {
    expect(x).toMatchObject({ total: clip.length, verified: 'segments', claimedSender: sender });
    // A range proves the segments, not the sender: nothing in it may read as a verified sender.
    expect(x).not.toHaveProperty('bound');
  }
  expect(r.probe).toMatchObject({
    status: 206,
    contentRange: `bytes ${probeAt}-${clip.length - 1}/${clip.length}`,
    contentLength: String(clip.length - probeAt),
    acceptRanges: 'bytes',
    verified: 'segments',
    sha: createHash('sha256').update(clip.subarray(probeAt)).digest('hex'),
  });
}
