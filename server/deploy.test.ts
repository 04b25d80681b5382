import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildApp } from './app.js';
import { parseCommand, type Env, type ServerConfig } from './config.js';
import { memoryBucketStore } from './ratelimit/index.js';
import { parseCli as parseStandinCli } from '../devtools/standin/cli.js';
import { NO_RATE_LIMIT, testKeys } from './testing.js';

/**
 * server/Dockerfile and server/compose.yaml, kept from rotting without Docker: every command in them goes
 * through pg-pkg's (or pg-standin's) own argument parser with the environment compose would give it, the
 * health check asks a route the PKG serves, and the pieces agree with each other (one database for
 * migrate and server, the keys volume where the image's working directory is, the stand-in where the
 * PKG looks for its identity server).
 */

const read = (name: string) => readFile(new URL(name, import.meta.url), 'utf8');

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string; target?: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
}

let services: Record<string, Service>;
let dockerfile: Instruction[];
let bins: string[];
let devBins: string[];

interface Instruction {
  keyword: string;
  args: string;
}

/** Dockerfile instructions: comments dropped, continuation lines joined. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [, keyword, args] = /^\s*([A-Z]+)\s(.*)$/.exec(line) ?? [];
      if (keyword === undefined) throw new Error(`not an instruction: ${line}`);
      return { keyword, args: args!.trim() };
    });
}

/** Compose's `${VAR}` and `${VAR:-default}`, against the host environment `host`; other forms are refused. */
function interpolate(value: string, host: Env): string {
  return value.replace(/\$\{([^}]*)\}/g, (_, inner: string) => {
    const match = /^([A-Z_][A-Z0-9_]*)(?::-(.*))?$/.exec(inner);
    if (match === null) throw new Error(`unsupported interpolation \${${inner}}`);
    const set = host[match[1]!];
    return set !== undefined && set !== '' ? set : (match[2] ?? '');
  });
}

/** The environment compose gives a service's container, for this host environment. */
function containerEnv(service: Service, host: Env = {}): Env {
  return Object.fromEntries(
    Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), host)]),
  );
}

/** The PKG image's stage: from the last FROM on. */
const runtime = () => dockerfile.slice(dockerfile.findLastIndex((i) => i.keyword === 'FROM'));

const ours = (service: Service) => service.image === services['pkg']!.image;

function serverConfig(host: Env = {}): ServerConfig & { migrate: boolean } {
  const pkg = services['pkg']!;
  const command = parseCommand(pkg.command!.slice(1), containerEnv(pkg, host));
  if (command.kind !== 'server') throw new Error(`pkg runs ${command.kind}`);
  return { ...command.config, migrate: command.migrate };
}

beforeAll(async () => {
  // Compose resolves YAML merge keys (<<:), as YAML 1.1 did.
  services = (parse(await read('./compose.yaml'), { merge: true }) as { services: Record<string, Service> }).services;
  dockerfile = instructions(await read('./Dockerfile'));
  bins = Object.keys((JSON.parse(await read('./package.json')) as { bin: Record<string, string> }).bin);
  devBins = Object.keys((JSON.parse(await read('../devtools/package.json')) as { bin: Record<string, string> }).bin);
});

describe('compose.yaml', () => {
  it('builds our image from server/Dockerfile with the repository root as context', () => {
    const pkg = services['pkg']!;
    expect(pkg.build).toEqual({ context: '..', dockerfile: 'server/Dockerfile' });
    expect(
      Object.keys(services)
        .filter((name) => ours(services[name]!))
        .sort(),
    ).toEqual(['keygen', 'migrate', 'pkg']);
  });

  it("the stand-in runs from the dev tools' own image (the Dockerfile's devtools stage), never from the PKG's", () => {
    const standin = services['standin']!;
    expect(standin.image).not.toBe(services['pkg']!.image);
    expect(standin.build).toEqual({ context: '..', dockerfile: 'server/Dockerfile', target: 'devtools' });
    const stages = dockerfile.filter((i) => i.keyword === 'FROM').map((i) => i.args);
    expect(stages).toContainEqual(expect.stringMatching(/ AS devtools$/));
    // The PKG's image is the last stage, and nothing of the dev tools is copied into it.
    expect(stages.at(-1)).not.toMatch(/ AS /);
    expect(runtime().filter((i) => i.keyword === 'COPY')).toEqual([
      { keyword: 'COPY', args: '--from=build /app /opt/pg-pkg' },
    ]);
    const [bin, ...argv] = standin.command ?? [];
    expect(devBins).toContain(bin);
    expect(bins).not.toContain(bin);
    expect(parseStandinCli(argv).kind).not.toBe('help');
  });

  it("every command of our image is one of the package's bins, and its parser accepts it", () => {
    const kinds: string[] = [];
    for (const [name, service] of Object.entries(services)) {
      if (!ours(service)) continue;
      const [bin, ...argv] = service.command ?? [];
      expect(bins, name).toContain(bin);
      const command = parseCommand(argv, containerEnv(service)); // throws ConfigError on anything wrong
      expect(command.kind, name).not.toBe('help');
      kinds.push(command.kind);
    }
    expect(kinds.sort()).toEqual(['gen', 'migrate', 'server']);
  });

  it('keys are generated once into the volume the PKG reads, at the working directory of the image', () => {
    const gen = parseCommand(services['keygen']!.command!.slice(1), {});
    expect(gen).toMatchObject({ kind: 'gen', ifMissing: true, paths: { ibeSecret: './pkg_ibe.sec' } });
    const workdir = dockerfile.filter((i) => i.keyword === 'WORKDIR').at(-1)?.args;
    expect(workdir).toBe('/keys');
    expect(services['keygen']!.volumes).toEqual(['keys:/keys']);
    expect(services['pkg']!.volumes).toEqual(['keys:/keys:ro']);
    expect(serverConfig().keyPaths).toEqual({
      ibeSecret: './pkg_ibe.sec',
      ibePublic: './pkg_ibe.pub',
      ibsSecret: './pkg_ibs.sec',
      ibsPublic: './pkg_ibs.pub',
    });
  });

  it('the PKG starts after the keys and the schema exist, on the database migrate prepared, with shared Redis', () => {
    const pkg = services['pkg']!;
    expect(pkg.depends_on).toMatchObject({
      keygen: { condition: 'service_completed_successfully' },
      migrate: { condition: 'service_completed_successfully' },
    });
    const migrate = parseCommand(services['migrate']!.command!.slice(1), containerEnv(services['migrate']!));
    const config = serverConfig();
    expect(migrate).toMatchObject({ kind: 'migrate', databaseUrl: config.databaseUrl });
    expect(config.databaseUrl).toMatch(/@postgres:5432\//);
    expect(config.redisUrl).toBe('redis://redis:6379');
    expect(config.migrate).toBe(false);
    expect(pkg.ports).toEqual([`${config.port}:${config.port}`]);
  });

  it('by default the PKG asks the stand-in; IDENTITY_SERVER and IRMA_TOKEN switch it to a real Yivi server', () => {
    const standin = parseStandinCli(services['standin']!.command!.slice(1));
    if (standin.kind !== 'run') throw new Error('the stand-in should run');
    expect(serverConfig().identityServer).toEqual({ url: `http://standin:${standin.port}`, token: undefined });
    expect(services['standin']!.ports).toEqual([`${standin.port}:${standin.port}`]);

    const real = serverConfig({ IDENTITY_SERVER: 'https://yivi.example.org', IRMA_TOKEN: 'secret-token' });
    expect(real.identityServer).toEqual({ url: 'https://yivi.example.org', token: 'secret-token' });
    // `docker compose up pkg` must not drag the stand-in along.
    expect(Object.keys(services['pkg']!.depends_on ?? {})).not.toContain('standin');
  });
});

describe('Dockerfile', () => {
  let app: ReturnType<typeof buildApp>;
  beforeAll(() => {
    app = buildApp({
      keys: testKeys(),
      identityServer: { url: 'http://127.0.0.1:1' },
      rateLimit: { settings: NO_RATE_LIMIT, store: memoryBucketStore() },
      allowedOrigins: ['*'],
      processMetrics: false,
    });
  });
  afterAll(() => app.close());

  it('is multi-stage, and the image runs as the unprivileged node user', () => {
    expect(dockerfile.filter((i) => i.keyword === 'FROM').length).toBeGreaterThanOrEqual(2);
    expect(runtime()[0]!.args).toMatch(/^node:20-(alpine|slim)/);
    expect(
      runtime()
        .filter((i) => i.keyword === 'USER')
        .map((i) => i.args),
    ).toEqual(['node']);
  });

  it('its health check asks a route the PKG answers 200 OK, on the port pg-pkg listens on by default', async () => {
    const check = runtime().find((i) => i.keyword === 'HEALTHCHECK')?.args ?? '';
    const url = /CMD .*?(http:\/\/127\.0\.0\.1:(\d+)(\/\S*))/.exec(check);
    expect(url).not.toBeNull();
    expect(Number(url![2])).toBe(serverConfig().port);
    const response = await app.inject({ method: 'GET', url: url![3]! });
    expect(response.statusCode).toBe(200);
    expect(response.body).toBe('OK');
  });

  it('its default command is pg-pkg server, which the compose environment completes', () => {
    const cmd = JSON.parse(runtime().find((i) => i.keyword === 'CMD')!.args) as string[];
    expect(cmd).toEqual(services['pkg']!.command);
  });

  it("copies every workspace's package.json before npm ci (or npm ci would find the lock out of sync)", async () => {
    const workspaces = (JSON.parse(await read('../package.json')) as { workspaces: string[] }).workspaces;
    const copied = dockerfile
      .filter((i) => i.keyword === 'COPY')
      .map((i) => /^(\S+)\/package\.json \S+\/$/.exec(i.args)?.[1])
      .filter((w) => w !== undefined);
    expect(copied.sort()).toEqual([...workspaces].sort());
  });

  it('the build context leaves out installed and built trees and key files', async () => {
    const ignored = (await read('./Dockerfile.dockerignore')).split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['**/node_modules', '**/dist', '.git', '**/pkg_ib[es].sec']));
  });
});
