/**
 * A check that a parser or normaliser handles its worst input in time linear in its size: a crafted
 * input (long runs of whitespace, repeated separators, nested structure…) must be refused with a
 * typed error or handled within `factor` times the time of a benign input of the same size, plus
 * `slackMs`. The bounds are generous on purpose (the machine running the tests may be busy), so
 * only a real change of growth trips them, such as a quadratic pass over 1 MiB (minutes).
 *
 * The two inputs are compared at sizes rising by four up to `size`, so a quadratic case fails at
 * the first size where its cost shows (seconds), instead of running for minutes at the last one.
 * A size over budget is measured once more before it fails, so one hiccup of the machine does not.
 */

export interface LinearTimeInputs {
  /** Runs the parser on the crafted input (may return a promise). */
  crafted: () => unknown;
  /** Runs the parser on a benign input of the same size. */
  benign: () => unknown;
}

export interface LinearTimeOptions {
  /** Largest size handed to `inputs`, in bytes or characters. 1 MiB. */
  size?: number;
  /** True for an error that is the crafted input's typed refusal; anything else thrown fails the check. */
  refused?: (error: unknown) => boolean;
  /** 20. */
  factor?: number;
  /** 500. */
  slackMs?: number;
  /** How many sizes, each a quarter of the next. 4 (1/64, 1/16, 1/4 and all of `size`). */
  steps?: number;
}

export interface LinearTimeStep {
  size: number;
  benignMs: number;
  craftedMs: number;
  /** The crafted input's typed refusal, if it was refused. */
  refusal?: unknown;
}

export const MIB = 1024 * 1024;

/** `unit` repeated to exactly `n` characters (none for `n` ≤ 0): the runs crafted inputs are made of. */
export const repeated = (unit: string, n: number): string => {
  const length = Math.max(0, Math.floor(n));
  return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
};

interface Timed {
  ms: number;
  error?: unknown;
  threw: boolean;
}

async function timed(run: () => unknown): Promise<Timed> {
  const start = performance.now();
  try {
    await run();
    return { ms: performance.now() - start, threw: false };
  } catch (error) {
    return { ms: performance.now() - start, error, threw: true };
  }
}

/** The faster of two runs of the benign input (errors are the input's business, not this check's). */
async function benignTime(run: () => unknown): Promise<number> {
  const first = await timed(run);
  const second = await timed(run);
  return Math.min(first.ms, second.ms);
}

const format = (ms: number) => `${ms.toFixed(1)} ms`;

/**
 * Measures `inputs(size)` at each size and throws when the crafted input is over budget (twice in a
 * row) or throws something `refused` does not accept. Returns the measurements.
 */
export async function expectLinearTime(
  what: string,
  inputs: (size: number) => LinearTimeInputs | Promise<LinearTimeInputs>,
  options: LinearTimeOptions = {},
): Promise<LinearTimeStep[]> {
  const { size = MIB, refused = () => false, factor = 20, slackMs = 500, steps = 4 } = options;
  const report: LinearTimeStep[] = [];
  for (let step = steps - 1; step >= 0; step--) {
    const at = Math.max(1, Math.floor(size / 4 ** step));
    const { crafted, benign } = await inputs(at);
    let benignMs = 0;
    let result: Timed = { ms: 0, threw: false };
    for (let attempt = 0; attempt < 2; attempt++) {
      benignMs = await benignTime(benign);
      result = await timed(crafted);
      if (result.threw && !refused(result.error)) {
        throw new Error(`${what}: the crafted input of ${at} threw something other than a typed refusal`, {
          cause: result.error,
        });
      }
      if (result.ms <= factor * benignMs + slackMs) break;
      if (attempt === 1) {
        throw new Error(
          `${what}: the crafted input of ${at} took ${format(result.ms)}, over ${factor} × the benign ` +
            `${format(benignMs)} + ${slackMs} ms (not linear in its size)`,
        );
      }
    }
    report.push({ size: at, benignMs, craftedMs: result.ms, ...(result.threw ? { refusal: result.error } : {}) });
  }
  if (process.env['LINEAR_TIME_LOG'] !== undefined) {
    const last = report.at(-1)!;
    const outcome = last.refusal === undefined ? 'handled' : `refused (${describe(last.refusal)})`;
    console.log(
      `[linear] ${what}: ${last.size} → crafted ${format(last.craftedMs)} ${outcome}, benign ${format(last.benignMs)}`,
    );
  }
  return report;
}

function describe(error: unknown): string {
  if (typeof error !== 'object' || error === null) return String(error);
  const { name, code } = error as { name?: unknown; code?: unknown };
  return [name, code].filter((x) => typeof x === 'string').join(' ');
}
