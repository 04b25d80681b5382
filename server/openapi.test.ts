import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { breakingChanges } from './openapi-diff.js';
import { openApiDocument } from './openapi.js';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * The published contract: docs/openapi.json is what the route schemas generate (else: run
 * `npx tsx scripts/openapi.ts`), it describes /v2 as the server answers it, the breaking-change gate
 * fails on removed and narrowed things (fixtures made from the real document) and passes additions, and
 * the deprecated /v2/irma/* alias answers with Deprecation, Sunset and a successor link.
 */

type Doc = {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  [key: string]: unknown;
};

let generated: Doc;
let committed: Doc;

beforeAll(async () => {
  generated = (await openApiDocument()) as Doc;
  committed = JSON.parse(await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8')) as Doc;
});

// Through JSON: the generated document shares schema objects between routes (both parameters routes).
const clone = (doc: Doc): Doc => JSON.parse(JSON.stringify(doc)) as Doc;

const at = (doc: Doc, ...path: string[]): any => path.reduce<any>((node, key) => node[key], doc);

const SIGN_KEY_BODY = ['paths', '/v2/request/sign/key', 'post', 'requestBody', 'content', 'application/json', 'schema'];
const PARAMETERS_200 = ['paths', '/v2/parameters', 'get', 'responses', '200', 'content', 'application/json', 'schema'];
const KEY_200 = ['paths', '/v2/request/key/{timestamp}', 'get', 'responses', '200', 'content', 'application/json'];

describe('docs/openapi.json', () => {
  it('is current: what the route schemas generate (else run `npx tsx scripts/openapi.ts`)', () => {
    expect(committed).toEqual(generated);
  });

  it('is OpenAPI 3.1 and names every /v2 route under every identity prefix, the irma ones deprecated', () => {
    expect(generated.openapi).toBe('3.1.0');
    for (const prefix of ['irma', 'request', 'idp']) {
      for (const [path, method] of [
        ['start', 'post'],
        ['jwt/{token}', 'get'],
        ['statusevents/{token}', 'get'],
        ['key', 'get'],
        ['key/{timestamp}', 'get'],
        ['sign/key', 'post'],
      ] as const) {
        const operation = generated.paths[`/v2/${prefix}/${path}`]?.[method];
        expect(operation, `${method} /v2/${prefix}/${path}`).toBeDefined();
        expect(operation!['deprecated'] === true).toBe(prefix === 'irma');
      }
    }
    for (const path of ['/v2/parameters', '/v2/sign/parameters', '/v2/api-key/validate'])
      expect(generated.paths[path]?.['get']).toBeDefined();
    expect(at(generated, ...SIGN_KEY_BODY)).toMatchObject({ required: ['pubSignId'], additionalProperties: false });
    expect(generated.paths['/v2/request/statusevents/{token}']!['get']!['responses']).toMatchObject({
      200: { content: { 'text/event-stream': {} } },
    });
  });

  it('the committed document has no breaking change against what the routes generate', () => {
    expect(breakingChanges(committed, generated)).toEqual([]);
  });
});

describe('the breaking-change gate', () => {
  it('fails on a removed response field (a fixture: /v2/parameters without publicKey)', () => {
    const next = clone(generated);
    const schema = at(next, ...PARAMETERS_200);
    delete schema.properties.publicKey;
    schema.required = schema.required.filter((f: string) => f !== 'publicKey');
    expect(breakingChanges(generated, next)).toEqual([
      'GET /v2/parameters response 200.publicKey: no longer always present',
      'GET /v2/parameters response 200.publicKey: removed',
    ]);
  });

  it('fails on every kind of removal and narrowing under /v2', () => {
    const cases: Array<[string, (doc: Doc) => void, RegExp]> = [
      ['a path', (d) => delete d.paths['/v2/request/start'], /^\/v2\/request\/start: removed$/],
      ['an operation', (d) => delete d.paths['/v2/sign/parameters']!['get'], /^GET \/v2\/sign\/parameters: removed$/],
      [
        'a response status',
        (d) => delete at(d, 'paths', '/v2/api-key/validate', 'get', 'responses')['200'],
        /response 200: removed$/,
      ],
      [
        'a path parameter',
        (d) => at(d, 'paths', '/v2/request/key/{timestamp}', 'get').parameters.pop(),
        /parameter path:timestamp: removed$/,
      ],
      ['a request field', (d) => delete at(d, ...SIGN_KEY_BODY).properties.privSignId, /body\.privSignId: removed/],
      ['a newly required field', (d) => at(d, ...SIGN_KEY_BODY).required.push('privSignId'), /newly required$/],
      ['a lower maxItems', (d) => (at(d, ...SIGN_KEY_BODY).properties.pubSignId.maxItems = 8), /maxItems lowered$/],
      [
        'a narrower type',
        (d) => (at(d, ...SIGN_KEY_BODY).properties.pubSignId.items.properties.v.type = 'string'),
        /pubSignId\[\]\.v: type narrowed$/,
      ],
      [
        'a new response enum value',
        (d) => at(d, ...KEY_200, 'schema').properties.status.enum.push('LOST'),
        /200\.status: new enum values$/,
      ],
      ['a removed media type', (d) => delete at(d, ...KEY_200.slice(0, -2)).content['application/json'], /removed$/],
    ];
    for (const [name, change, expected] of cases) {
      const next = clone(generated);
      change(next);
      const breaks = breakingChanges(generated, next);
      expect(breaks.length, name).toBeGreaterThan(0);
      expect(
        breaks.some((b) => expected.test(b)),
        `${name}: ${breaks.join('; ')}`,
      ).toBe(true);
    }
  });

  it('passes additions, and ignores what lies outside /v2', () => {
    const next = clone(generated);
    at(next, ...SIGN_KEY_BODY).properties.note = { type: 'string' };
    at(next, ...PARAMETERS_200).properties.comment = { type: 'string' };
    at(next, ...SIGN_KEY_BODY).properties.pubSignId.maxItems = 128;
    next.paths['/v2/request/new-thing'] = { get: { responses: {} } };
    delete next.paths['/metrics'];
    expect(breakingChanges(generated, next)).toEqual([]);
  });
});

describe('the deprecated /v2/irma alias', () => {
  let pkg: RunningPkg;
  beforeAll(async () => {
    pkg = await startPkg();
  });
  afterAll(async () => {
    await pkg?.close();
  });

  it('answers with Deprecation, Sunset and the successor; /v2/request and /v2/idp do not', async () => {
    const body = JSON.stringify({ con: [{ t: 'irma-demo.sidn-pbdf.email.email' }] });
    const start = (prefix: string) =>
      fetch(`${pkg.url}/v2/${prefix}/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const irma = await start('irma');
    expect(irma.status).toBe(200);
    expect(irma.headers.get('deprecation')).toBe('@1785110400');
    expect(new Date(Number(irma.headers.get('deprecation')!.slice(1)) * 1000).toISOString()).toBe(
      '2026-07-27T00:00:00.000Z',
    );
    expect(irma.headers.get('sunset')).toBe('Tue, 27 Jul 2027 00:00:00 GMT');
    expect(irma.headers.get('link')).toBe('</v2/request/start>; rel="successor-version"');
    // Errors of the alias say it too.
    const refused = await fetch(`${pkg.url}/v2/irma/key/12`, { headers: { authorization: 'Bearer x.y.z' } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('deprecation')).toBe('@1785110400');
    expect(refused.headers.get('link')).toBe('</v2/request/key/12>; rel="successor-version"');
    for (const prefix of ['request', 'idp']) {
      const current = await start(prefix);
      expect(current.status).toBe(200);
      expect(current.headers.get('deprecation')).toBeNull();
      expect(current.headers.get('sunset')).toBeNull();
    }
    expect((await fetch(`${pkg.url}/v2/parameters`)).headers.get('deprecation')).toBeNull();
  });
});
