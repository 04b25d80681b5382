import { describe, expect, it } from 'vitest';
import { ATTACKERS, FILE_KINDS, buildThreatModel, type ThreatModel } from '../test/threat-model.js';
import { chunkedSource, collector } from '../test/streams.js';
import { generatePkgKeys } from './keys.js';
import { claimedSenderReport, senderReport } from './sender.js';
import { StreamUnsealer } from './unseal.js';

/**
 * docs/security.md, row by row, through the API: each attacker's best forgery of each kind of
 * file, opened as a reader would. What the library reports must be exactly the row's outcome, and
 * the words derived from it never claim more than that row allows.
 */

const keys = generatePkgKeys();
const model: Promise<ThreatModel> = buildThreatModel(keys, 1_760_000_000);

async function open(file: Uint8Array, usk: string, recipient: string) {
  const unsealer = await StreamUnsealer.new(chunkedSource(file, 4096), keys.vk);
  const claimed = unsealer.public_identity();
  const sink = collector();
  const result = await unsealer.unseal(recipient, usk, sink.writable);
  return { claimed, result, sink };
}

describe('threat model (docs/security.md): what each attacker can make a reader report', () => {
  for (const attacker of ATTACKERS) {
    for (const kind of FILE_KINDS) {
      it(`${attacker} × ${kind}`, async () => {
        const { rows, bobUsk } = await model;
        const row = rows.find((r) => r.attacker === attacker && r.kind === kind)!;
        if ('error' in row.outcome) {
          const { error, at } = row.outcome;
          if (at === 'header') {
            await expect(StreamUnsealer.new(chunkedSource(row.file), keys.vk)).rejects.toMatchObject({ code: error });
          } else {
            const unsealer = await StreamUnsealer.new(chunkedSource(row.file), keys.vk);
            expect(unsealer.public_identity()).toEqual(row.claimed);
            const sink = collector();
            await expect(unsealer.unseal('bob@example.com', bobUsk, sink.writable)).rejects.toMatchObject({
              code: error,
            });
            // Nothing reads as complete: the output was aborted, not closed.
            expect(sink.state()).toBe('aborted');
          }
          return;
        }
        const { claimed, result } = await open(row.file, bobUsk, 'bob@example.com');
        // Before unsealing the header's sender is only ever a claim.
        expect(claimed).toEqual(row.claimed);
        expect(claimedSenderReport(claimed).standing).toBe('claimed');
        expect(result).toEqual(row.outcome.result);
        const report = senderReport(result);
        // "Verified sender" exactly when the public identity signed the content of a bound file.
        expect(report.standing === 'verified').toBe(result.bound && result.contentSigner === 'public');
        if (result.contentSigner === 'private') {
          expect(report.lines[0]).toEqual({ label: 'Content signed by', policy: result.private });
          expect(report.lines[1]!.policy).toEqual(result.public);
          expect(report.lines[1]!.label).toMatch(/not part of the content signature/);
        }
        expect(report.demoCredentials).toBe(kind === 'demo-sender');
      });
    }
  }

  it('the co-recipient forgery that the old wording showed as "sealed by alice" now names the content signer', async () => {
    const { rows, bobUsk } = await model;
    const row = rows.find((r) => r.attacker === 'co-recipient' && r.kind === 'bound')!;
    const { result } = await open(row.file, bobUsk, 'bob@example.com');
    expect(result.bound).toBe(true); // bound, as the old badge required …
    const report = senderReport(result);
    expect(report.standing).toBe('content-signer'); // … but not a verified sender
    expect(report.lines.map((l) => l.label)).toEqual([
      'Content signed by',
      'Claimed in the signed header (not part of the content signature)',
    ]);
  });
});
