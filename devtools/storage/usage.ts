/**
 * The rolling upload quota: bytes finalized per account (the sender's e-mail, or
 * `api-key:<tenant>` when init carried a validated API key) within a sliding window.
 */

export interface UsageSummary {
  usedBytes: number;
  /** Unix seconds at which the oldest counted upload leaves the window. */
  oldestExpiresAt: number | undefined;
}

export class UsageLedger {
  private readonly records = new Map<string, Array<{ at: number; bytes: number }>>();

  constructor(private readonly windowSeconds: number) {}

  usage(account: string, now: number): UsageSummary {
    const kept = (this.records.get(account) ?? []).filter((r) => r.at > now - this.windowSeconds);
    this.records.set(account, kept);
    const usedBytes = kept.reduce((sum, r) => sum + r.bytes, 0);
    const oldest = kept.reduce<number | undefined>(
      (min, r) => (min === undefined || r.at < min ? r.at : min),
      undefined,
    );
    return { usedBytes, oldestExpiresAt: oldest === undefined ? undefined : oldest + this.windowSeconds };
  }

  record(account: string, bytes: number, now: number): void {
    const list = this.records.get(account) ?? [];
    list.push({ at: now, bytes });
    this.records.set(account, list);
  }
}
