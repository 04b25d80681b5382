import { spawn } from 'node:child_process';

/**
 * Runs shell commands side by side, one lane each, and fails if any lane fails. Each lane's
 * output is held and printed whole when the lane ends, so logs stay readable. `npm test` runs its
 * static checks in two such lanes: each check is one single-threaded process (tsc, eslint), so
 * two lanes keep both of CI's cores busy where one after the other kept one.
 *
 *   node --import tsx scripts/lanes.ts 'npm run typecheck && npm run check:packages' 'npm run lint'
 */

const lanes = process.argv.slice(2);
if (lanes.length === 0) {
  console.error('usage: lanes.ts <command> [<command> ...]');
  process.exit(2);
}

const started = Date.now();
const results = await Promise.all(
  lanes.map(
    (command) =>
      new Promise<{ command: string; code: number; output: string; seconds: number }>((resolve) => {
        const chunks: Buffer[] = [];
        const child = spawn(command, { shell: true, stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.on('data', (c: Buffer) => chunks.push(c));
        child.stderr.on('data', (c: Buffer) => chunks.push(c));
        child.on('close', (code, signal) => {
          const result = {
            command,
            code: code ?? (signal ? 1 : 0),
            output: Buffer.concat(chunks).toString('utf8'),
            seconds: (Date.now() - started) / 1000,
          };
          console.log(
            `\n== lane: ${command} (${result.code === 0 ? 'passed' : 'FAILED'}, ${result.seconds.toFixed(0)} s)`,
          );
          process.stdout.write(result.output);
          resolve(result);
        });
      }),
  ),
);
const failed = results.filter((r) => r.code !== 0);
console.log(
  `\nlanes: ${results.length - failed.length} of ${results.length} passed in ${((Date.now() - started) / 1000).toFixed(0)} s`,
);
if (failed.length > 0) {
  for (const f of failed) console.error(`failed: ${f.command} (exit ${f.code})`);
  process.exit(1);
}
