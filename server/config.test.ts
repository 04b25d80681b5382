import { describe, expect, it } from 'vitest';
import { ConfigError, parseCommand, type Command, type Env, type ServerConfig } from './config.js';

const ORIGINS = { PKG_ALLOWED_ORIGINS: 'https://app.example' };

function server(argv: string[], env: Env = ORIGINS): ServerConfig {
  const command = parseCommand(['server', ...argv], env);
  if (command.kind !== 'server') throw new Error(`expected a server command, got ${command.kind}`);
  return command.config;
}

/** The setting a ConfigError names, or 'OK'. */
function settingAtFault(argv: string[], env: Env = ORIGINS): string {
  try {
    parseCommand(argv, env);
    return 'OK';
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    expect(e.message).not.toContain('\n');
    return e.setting ?? e.message;
  }
}

describe('server defaults', () => {
  it('follow the spec: 0.0.0.0:8080, is.yivi.app, the spec rate limits, pbdf e-mail, info', () => {
    expect(server([])).toEqual({
      host: '0.0.0.0',
      port: 8080,
      identityServer: { url: 'https://is.yivi.app', token: undefined },
      databaseUrl: undefined,
      allowedOrigins: ['https://app.example'],
      rateLimit: {
        perSecond: 10,
        burst: 50,
        sensitivePerSecond: 2,
        sensitiveBurst: 10,
        disabled: false,
        trustForwardedFor: false,
        trustedProxies: [],
      },
      emailAttribute: 'pbdf.sidn-pbdf.email.email',
      logLevel: 'info',
      keyPaths: {
        ibeSecret: './pkg_ibe.sec',
        ibePublic: './pkg_ibe.pub',
        ibsSecret: './pkg_ibs.sec',
        ibsPublic: './pkg_ibs.pub',
      },
      keySetPath: './pkg_keys.json',
      workers: 1,
      redisUrl: undefined,
      redisFailure: 'open',
      redisTimeoutMs: 250,
      connections: {
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5_000,
        maxConnections: 10_000,
        maxConnectionsPerAddress: 64,
      },
      statusStreams: { perClient: 10, total: 2000, maxDurationMs: 900_000, retryAfterSeconds: 5 },
      jwtIssuer: undefined,
      refuseDemoSchemes: false,
    } satisfies ServerConfig);
  });

  it('allowed origins are required, from the flag or PKG_ALLOWED_ORIGINS', () => {
    expect(settingAtFault(['server'], {})).toBe('--allowed-origins / PKG_ALLOWED_ORIGINS');
    expect(settingAtFault(['server'], { PKG_ALLOWED_ORIGINS: '' })).toBe('--allowed-origins / PKG_ALLOWED_ORIGINS');
    expect(server(['--allowed-origins', 'https://a.example'], {}).allowedOrigins).toEqual(['https://a.example']);
  });
});

describe('connection limits', () => {
  it('from flags or their variables, bounded; the request deadline is no shorter than the headers one', () => {
    const flags = [
      '--allowed-origins',
      '*',
      '--headers-timeout-ms',
      '2000',
      '--request-timeout-ms',
      '4000',
      '--keep-alive-timeout-ms',
      '1000',
      '--max-connections',
      '50',
    ];
    expect(server(flags, {}).connections).toEqual({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 4000,
      keepAliveTimeoutMs: 1000,
      maxConnections: 50,
      maxConnectionsPerAddress: 50,
    });
    expect(
      server(['--allowed-origins', '*'], { PKG_HEADERS_TIMEOUT_MS: '3000', PKG_MAX_CONNECTIONS: '7' }).connections,
    ).toMatchObject({ headersTimeoutMs: 3000, maxConnections: 7 });
    expect(settingAtFault(['server', '--allowed-origins', '*', '--max-connections', '0'], {})).toMatch(
      /max-connections/,
    );
    expect(settingAtFault(['server', '--allowed-origins', '*', '--headers-timeout-ms', 'soon'], {})).toMatch(
      /headers-timeout-ms/,
    );
    expect(
      settingAtFault(
        ['server', '--allowed-origins', '*', '--headers-timeout-ms', '20000', '--request-timeout-ms', '10000'],
        {},
      ),
    ).toMatch(/request-timeout-ms/);
  });

  it('the per-address cap: flag or variable, at most the global cap; by default 64, or the global cap if lower', () => {
    const base = ['--allowed-origins', '*'];
    expect(server([...base, '--max-connections-per-address', '8'], {}).connections.maxConnectionsPerAddress).toBe(8);
    expect(server(base, { PKG_MAX_CONNECTIONS_PER_ADDRESS: '9', PKG_MAX_CONNECTIONS: '20' }).connections).toMatchObject(
      { maxConnections: 20, maxConnectionsPerAddress: 9 },
    );
    expect(server([...base, '--max-connections', '20'], {}).connections.maxConnectionsPerAddress).toBe(20);
    for (const value of ['0', 'many', '21'])
      expect(
        settingAtFault(['server', ...base, '--max-connections', '20', '--max-connections-per-address', value], {}),
      ).toMatch(/max-connections-per-address/);
    expect(settingAtFault(['server', ...base], { PKG_MAX_CONNECTIONS_PER_ADDRESS: '10001' })).toMatch(
      /PKG_MAX_CONNECTIONS_PER_ADDRESS/,
    );
  });
});

describe('--refuse-demo-schemes', () => {
  const base = ['--allowed-origins', '*'];

  it('off by default; on by the flag or PKG_REFUSE_DEMO_SCHEMES', () => {
    expect(server(base, {}).refuseDemoSchemes).toBe(false);
    expect(server([...base, '--refuse-demo-schemes'], {}).refuseDemoSchemes).toBe(true);
    expect(server(base, { PKG_REFUSE_DEMO_SCHEMES: 'true' }).refuseDemoSchemes).toBe(true);
    expect(server(base, { PKG_REFUSE_DEMO_SCHEMES: 'false' }).refuseDemoSchemes).toBe(false);
    expect(settingAtFault(['server', ...base], { PKG_REFUSE_DEMO_SCHEMES: 'sure' })).toBe('PKG_REFUSE_DEMO_SCHEMES');
  });

  it('cannot be combined with a demo-scheme --email-attribute (API-key signing would always be refused)', () => {
    const demoEmail = ['--email-attribute', 'irma-demo.sidn-pbdf.email.email'];
    expect(server([...base, ...demoEmail], {}).emailAttribute).toBe('irma-demo.sidn-pbdf.email.email');
    expect(settingAtFault(['server', ...base, ...demoEmail, '--refuse-demo-schemes'], {})).toMatch(/email-attribute/);
  });
});

describe('limits of this branch: proxies, Redis failure, status-event streams, JWT issuer', () => {
  const base = ['--allowed-origins', '*'];

  it('--trusted-proxies / PKG_TRUSTED_PROXIES: addresses and CIDR ranges, checked', () => {
    expect(
      server([...base, '--trusted-proxies', '10.0.0.0/8, 127.0.0.1,fd00::/8'], {}).rateLimit.trustedProxies,
    ).toEqual(['10.0.0.0/8', '127.0.0.1', 'fd00::/8']);
    expect(server(base, { PKG_TRUSTED_PROXIES: '192.0.2.1' }).rateLimit.trustedProxies).toEqual(['192.0.2.1']);
    expect(
      server([...base, '--trusted-proxies', '192.0.2.9'], { PKG_TRUSTED_PROXIES: '192.0.2.1' }).rateLimit
        .trustedProxies,
    ).toEqual(['192.0.2.9']);
    for (const bad of ['proxy.example', '10.0.0.0/40', ' , ', '10.0.0.1,nope']) {
      expect(settingAtFault(['server', ...base, '--trusted-proxies', bad], {}), bad).toBe('--trusted-proxies');
    }
    expect(settingAtFault(['server', ...base], { PKG_TRUSTED_PROXIES: 'x' })).toBe('PKG_TRUSTED_PROXIES');
    // The deprecated flag and its replacement together would be two answers to one question.
    expect(
      settingAtFault(['server', ...base, '--trusted-proxies', '10.0.0.0/8', '--ratelimit-trust-forwarded-for'], {}),
    ).toMatch(/trust-forwarded-for/);
  });

  it('--redis-failure open|closed and --redis-timeout-ms', () => {
    expect(server([...base, '--redis-failure', 'closed'], {}).redisFailure).toBe('closed');
    expect(server(base, { PKG_REDIS_FAILURE: 'OPEN' }).redisFailure).toBe('open');
    expect(settingAtFault(['server', ...base, '--redis-failure', 'maybe'], {})).toBe('--redis-failure');
    expect(server([...base, '--redis-timeout-ms', '100'], {}).redisTimeoutMs).toBe(100);
    expect(server(base, { PKG_REDIS_TIMEOUT_MS: '500' }).redisTimeoutMs).toBe(500);
    expect(settingAtFault(['server', ...base, '--redis-timeout-ms', '0'], {})).toBe('--redis-timeout-ms');
  });

  it('status-event stream caps and lifetime; per client no more than in all', () => {
    const flags = [
      ...base,
      '--statusevents-per-client',
      '3',
      '--statusevents-max',
      '50',
      '--statusevents-max-seconds',
      '60',
    ];
    expect(server(flags, {}).statusStreams).toEqual({
      perClient: 3,
      total: 50,
      maxDurationMs: 60_000,
      retryAfterSeconds: 5,
    });
    const env = { PKG_STATUSEVENTS_PER_CLIENT: '2', PKG_STATUSEVENTS_MAX: '4', PKG_STATUSEVENTS_MAX_SECONDS: '30' };
    expect(server(base, env).statusStreams).toMatchObject({ perClient: 2, total: 4, maxDurationMs: 30_000 });
    expect(settingAtFault(['server', ...base, '--statusevents-per-client', '0'], {})).toBe('--statusevents-per-client');
    expect(
      settingAtFault(['server', ...base, '--statusevents-max', '5', '--statusevents-per-client', '6'], {}),
    ).toMatch(/statusevents-per-client/);
    expect(settingAtFault(['server', ...base, '--statusevents-max-seconds', '86401'], {})).toBe(
      '--statusevents-max-seconds',
    );
  });

  it('--jwt-issuer / PKG_JWT_ISSUER', () => {
    expect(server([...base, '--jwt-issuer', 'yivi.example'], {}).jwtIssuer).toBe('yivi.example');
    expect(server(base, { PKG_JWT_ISSUER: 'irmaserver' }).jwtIssuer).toBe('irmaserver');
    expect(settingAtFault(['server', ...base, '--jwt-issuer', ' '], {})).toBe('--jwt-issuer');
  });
});

describe('flags and their environment twins', () => {
  const full: Env = {
    IDENTITY_SERVER: 'https://yivi.example',
    IRMA_TOKEN: 'env-token',
    DATABASE_URL: 'postgres://db/pkg',
    PKG_ALLOWED_ORIGINS: 'https://a.example, http://localhost:5173/',
    PKG_RATELIMIT_PER_SECOND: '20',
    PKG_RATELIMIT_BURST: '100',
    PKG_RATELIMIT_SENSITIVE_PER_SECOND: '3',
    PKG_RATELIMIT_SENSITIVE_BURST: '12',
    PKG_RATELIMIT_DISABLED: 'true',
    PKG_RATELIMIT_TRUST_FORWARDED_FOR: '1',
    PKG_EMAIL_ATTRIBUTE: 'irma-demo.sidn-pbdf.email.email',
    PKG_REDIS_URL: 'redis://127.0.0.1:6379',
    PKG_WORKERS: '4',
    RUST_LOG: 'debug',
  };

  it('every variable is read', () => {
    const config = server([], full);
    expect(config.identityServer).toEqual({ url: 'https://yivi.example', token: 'env-token' });
    expect(config.databaseUrl).toBe('postgres://db/pkg');
    expect(config.allowedOrigins).toEqual(['https://a.example', 'http://localhost:5173']);
    expect(config.rateLimit).toEqual({
      perSecond: 20,
      burst: 100,
      sensitivePerSecond: 3,
      sensitiveBurst: 12,
      disabled: true,
      trustForwardedFor: true,
      trustedProxies: [],
    });
    expect(config.emailAttribute).toBe('irma-demo.sidn-pbdf.email.email');
    expect(config.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(config.workers).toBe(4);
    expect(config.logLevel).toBe('debug');
  });

  it('every flag wins over its variable', () => {
    const config = server(
      [
        '-i',
        'http://127.0.0.1:8088/',
        '-t',
        'flag-token',
        '-d',
        'postgres://other/db',
        '--allowed-origins',
        'https://b.example',
        '--ratelimit-per-second',
        '1',
        '--ratelimit-burst',
        '2',
        '--ratelimit-sensitive-per-second',
        '3',
        '--ratelimit-sensitive-burst',
        '4',
        '--email-attribute',
        'pbdf.sidn-pbdf.email.email',
        '--redis-url',
        'rediss://cache:6380',
        '--workers',
        '2',
        '--log-level',
        'error',
        '-H',
        '127.0.0.1',
        '-p',
        '9000',
        '--ibe-secret-path',
        '/k/a',
        '--ibe-public-path',
        '/k/b',
        '--ibs-secret-path',
        '/k/c',
        '--ibs-public-path',
        '/k/d',
      ],
      full,
    );
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 9000,
      identityServer: { url: 'http://127.0.0.1:8088', token: 'flag-token' },
      databaseUrl: 'postgres://other/db',
      allowedOrigins: ['https://b.example'],
      rateLimit: { perSecond: 1, burst: 2, sensitivePerSecond: 3, sensitiveBurst: 4 },
      emailAttribute: 'pbdf.sidn-pbdf.email.email',
      redisUrl: 'rediss://cache:6380',
      workers: 2,
      logLevel: 'error',
      keyPaths: { ibeSecret: '/k/a', ibePublic: '/k/b', ibsSecret: '/k/c', ibsPublic: '/k/d' },
    });
    expect(server(['--irma=https://x.example'], full).identityServer.url).toBe('https://x.example');
  });

  it('boolean flags switch on whatever the variable says; variables take true/false spellings', () => {
    const off = { ...ORIGINS, PKG_RATELIMIT_DISABLED: 'false', PKG_RATELIMIT_TRUST_FORWARDED_FOR: 'no' };
    expect(server([], off).rateLimit).toMatchObject({ disabled: false, trustForwardedFor: false });
    expect(server(['--ratelimit-disabled', '--ratelimit-trust-forwarded-for'], off).rateLimit).toMatchObject({
      disabled: true,
      trustForwardedFor: true,
    });
    for (const yes of ['true', 'TRUE', '1', 'yes', 'on'])
      expect(server([], { ...ORIGINS, PKG_RATELIMIT_DISABLED: yes }).rateLimit.disabled).toBe(true);
  });

  it('LOG_LEVEL wins over RUST_LOG; both accept any case', () => {
    expect(server([], { ...ORIGINS, RUST_LOG: 'WARN' }).logLevel).toBe('warn');
    expect(server([], { ...ORIGINS, RUST_LOG: 'debug', LOG_LEVEL: 'error' }).logLevel).toBe('error');
    expect(server([], { ...ORIGINS, RUST_LOG: 'off' }).logLevel).toBe('silent');
  });

  it('"*" anywhere in the list allows any origin', () => {
    expect(server(['--allowed-origins', 'https://a.example,*']).allowedOrigins).toEqual(['*']);
  });
});

describe('invalid configuration names the setting', () => {
  const cases: Array<[string[], Env, string]> = [
    [['server', '--port', '70000'], ORIGINS, '--port'],
    [['server', '--port', '80a'], ORIGINS, '--port'],
    [['server', '--port', '-1'], ORIGINS, 'server'],
    [['server', '-H', ''], ORIGINS, '--host'],
    [['server', '--irma', 'ftp://yivi.example'], ORIGINS, '--irma'],
    [['server', '--irma', 'not a url'], ORIGINS, '--irma'],
    [['server'], { ...ORIGINS, IDENTITY_SERVER: 'https://yivi.example/?x=1' }, 'IDENTITY_SERVER'],
    [['server', '-t', ''], ORIGINS, '--irma-token'],
    [['server'], { PKG_ALLOWED_ORIGINS: 'https://a.example/path' }, 'PKG_ALLOWED_ORIGINS'],
    [['server'], { PKG_ALLOWED_ORIGINS: 'a.example' }, 'PKG_ALLOWED_ORIGINS'],
    [['server', '--allowed-origins', 'ftp://a.example'], {}, '--allowed-origins'],
    [['server'], { ...ORIGINS, PKG_RATELIMIT_PER_SECOND: '0' }, 'PKG_RATELIMIT_PER_SECOND'],
    [['server'], { ...ORIGINS, PKG_RATELIMIT_BURST: 'lots' }, 'PKG_RATELIMIT_BURST'],
    [['server', '--ratelimit-sensitive-per-second', '2.5'], ORIGINS, '--ratelimit-sensitive-per-second'],
    [['server'], { ...ORIGINS, PKG_RATELIMIT_SENSITIVE_BURST: '99999999' }, 'PKG_RATELIMIT_SENSITIVE_BURST'],
    [['server'], { ...ORIGINS, PKG_RATELIMIT_DISABLED: 'maybe' }, 'PKG_RATELIMIT_DISABLED'],
    [['server'], { ...ORIGINS, PKG_RATELIMIT_TRUST_FORWARDED_FOR: '2' }, 'PKG_RATELIMIT_TRUST_FORWARDED_FOR'],
    [['server'], { ...ORIGINS, PKG_EMAIL_ATTRIBUTE: 'email' }, 'PKG_EMAIL_ATTRIBUTE'],
    [['server', '--email-attribute', 'pbdf.sidn-pbdf.email'], ORIGINS, '--email-attribute'],
    [['server'], { ...ORIGINS, RUST_LOG: 'pg_pkg=debug' }, 'RUST_LOG'],
    [['server'], { ...ORIGINS, LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [['server', '--workers', '0'], ORIGINS, '--workers'],
    [['server'], { ...ORIGINS, PKG_WORKERS: '1000' }, 'PKG_WORKERS'],
    [['server'], { ...ORIGINS, PKG_REDIS_URL: 'http://cache' }, 'PKG_REDIS_URL'],
    [['server', '--ibe-secret-path', ''], ORIGINS, '--ibe-secret-path'],
    [['server', '--unknown-flag'], ORIGINS, 'server'],
    [['server', 'extra'], ORIGINS, 'server'],
    [['gen', '--scheme', '2'], {}, '--scheme'],
    [['gen', '--port', '1'], {}, 'gen'],
    [[], {}, 'command'],
    [['serve'], {}, 'command'],
    [['api-key', 'delete'], {}, 'api-key'],
    [['api-key', 'create', '--email', 'a@x', '--org', 'X'], {}, '--database-url / DATABASE_URL'],
    [['api-key', 'create', '--email', 'nope', '--org', 'X'], { DATABASE_URL: 'postgres://db' }, '--email'],
    [['api-key', 'create', '--email', 'a@x'], { DATABASE_URL: 'postgres://db' }, '--org'],
  ];
  for (const [argv, env, setting] of cases) {
    it(`${JSON.stringify(argv)} ${JSON.stringify(env).slice(0, 60)} → ${setting}`, () => {
      expect(settingAtFault(argv, env)).toBe(setting);
    });
  }
});

describe('other commands', () => {
  it('--help everywhere', () => {
    const help = (argv: string[]): string => {
      const command: Command = parseCommand(argv, {});
      if (command.kind !== 'help') throw new Error('expected help');
      return command.text;
    };
    expect(help(['--help'])).toMatch(/^Usage: pg-pkg <command>/);
    expect(help(['-h'])).toMatch(/^Usage: pg-pkg <command>/);
    expect(help(['gen', '--help'])).toMatch(/^Usage: pg-pkg gen/);
    expect(help(['server', '-h'])).toMatch(/^Usage: pg-pkg server/);
    expect(help(['server', '--help'])).toContain('PKG_RATELIMIT_TRUST_FORWARDED_FOR');
    expect(help(['api-key'])).toMatch(/^Usage: pg-pkg api-key create/);
    expect(help(['api-key', 'create', '--help'])).toMatch(/^Usage: pg-pkg api-key create/);
  });

  it('gen takes scheme 3 and pg-pkg key paths', () => {
    expect(parseCommand(['gen'], {})).toEqual({
      kind: 'gen',
      paths: {
        ibeSecret: './pkg_ibe.sec',
        ibePublic: './pkg_ibe.pub',
        ibsSecret: './pkg_ibs.sec',
        ibsPublic: './pkg_ibs.pub',
      },
      ifMissing: false,
    });
    expect(parseCommand(['gen', '-s', '3', '--ibs-public-path', 'x.pub'], {})).toMatchObject({
      paths: { ibsPublic: 'x.pub' },
    });
    expect(parseCommand(['gen', '--if-missing'], {})).toMatchObject({ kind: 'gen', ifMissing: true });
  });

  it('api-key create reads DATABASE_URL or -d', () => {
    expect(
      parseCommand(['api-key', 'create', '--email', ' a@example.org ', '--org', 'Example BV'], {
        DATABASE_URL: 'postgres://env',
      }),
    ).toEqual({
      kind: 'api-key-create',
      databaseUrl: 'postgres://env',
      email: 'a@example.org',
      org: 'Example BV',
    });
    expect(
      parseCommand(['api-key', 'create', '--email', 'a@x', '--org', 'X', '-d', 'postgres://flag'], {
        DATABASE_URL: 'postgres://env',
      }),
    ).toMatchObject({
      databaseUrl: 'postgres://flag',
    });
  });

  it('server --migrate (or PKG_MIGRATE=true) migrates at start; it needs a database', () => {
    const parse = (argv: string[], env: Env) => parseCommand(['server', '--allowed-origins', '*', ...argv], env);
    expect(parse(['-d', 'postgres://db'], {})).toMatchObject({ kind: 'server', migrate: false });
    expect(parse(['-d', 'postgres://db', '--migrate'], {})).toMatchObject({ kind: 'server', migrate: true });
    expect(parse([], { DATABASE_URL: 'postgres://db', PKG_MIGRATE: 'true' })).toMatchObject({ migrate: true });
    expect(parse([], { DATABASE_URL: 'postgres://db', PKG_MIGRATE: 'false' })).toMatchObject({ migrate: false });
    expect(settingAtFault(['server', '--allowed-origins', '*', '--migrate'], {})).toBe('--migrate / PKG_MIGRATE');
    expect(
      settingAtFault(['server', '--allowed-origins', '*'], { DATABASE_URL: 'postgres://db', PKG_MIGRATE: 'maybe' }),
    ).toBe('PKG_MIGRATE');
  });

  it('migrate reads DATABASE_URL or -d, and needs one', () => {
    expect(parseCommand(['migrate'], { DATABASE_URL: 'postgres://env' })).toEqual({
      kind: 'migrate',
      databaseUrl: 'postgres://env',
    });
    expect(
      parseCommand(['migrate', '--database-url', 'postgres://flag'], { DATABASE_URL: 'postgres://env' }),
    ).toMatchObject({ databaseUrl: 'postgres://flag' });
    expect(settingAtFault(['migrate'], {})).toBe('--database-url / DATABASE_URL');
    expect(settingAtFault(['migrate', '--email', 'a@x'], { DATABASE_URL: 'postgres://env' })).toBe('migrate');
  });

  it('api-key list and revoke', () => {
    const env = { DATABASE_URL: 'postgres://env' };
    expect(parseCommand(['api-key', 'list'], env)).toEqual({
      kind: 'api-key-list',
      databaseUrl: 'postgres://env',
      org: undefined,
    });
    expect(parseCommand(['api-key', 'list', '--org', ' ACME '], env)).toMatchObject({ org: 'ACME' });
    const id = '3F2504E0-4F89-41D3-9A0C-0305E82C3301';
    expect(parseCommand(['api-key', 'revoke', '--id', id], env)).toEqual({
      kind: 'api-key-revoke',
      databaseUrl: 'postgres://env',
      ref: { id: id.toLowerCase() },
    });
    expect(parseCommand(['api-key', 'revoke', '--key', 'PG-abc'], env)).toMatchObject({ ref: { key: 'PG-abc' } });
    expect(settingAtFault(['api-key', 'revoke'], env)).toBe('--id / --key');
    expect(settingAtFault(['api-key', 'revoke', '--id', id, '--key', 'PG-abc'], env)).toBe('--id / --key');
    expect(settingAtFault(['api-key', 'revoke', '--id', '42'], env)).toBe('--id');
    expect(settingAtFault(['api-key', 'revoke', '--key', 'abc'], env)).toBe('--key');
    expect(settingAtFault(['api-key', 'list'], {})).toBe('--database-url / DATABASE_URL');
    expect(settingAtFault(['api-key', 'delete'], env)).toBe('api-key');
  });
});
