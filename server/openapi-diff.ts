/**
 * The breaking-change gate of the PKG's /v2 contract: what a new OpenAPI document takes away from an old
 * one. A client written against the old document must keep working, so under /v2
 * - nothing is removed: no path, operation, parameter, response status, media type, or response field;
 * - requests are not narrowed: no new required parameter, body or field, no type, enum value or bound
 *   taken away, no property refused that was accepted, no pattern changed;
 * - responses are not widened where a client reads them: no field made optional, no new type (null) or
 *   enum value in a field.
 * Additions (paths, optional request fields, response fields, looser bounds) pass. `$ref`s are compared
 * by name. A small check of our own rather than an OpenAPI diff tool: our documents use a small part of
 * JSON Schema, and the rules above are all this repository needs.
 */

type Schema = Record<string, unknown>;
type Doc = { paths?: Record<string, Record<string, Schema>> };

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

const asSchema = (value: unknown): Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Schema) : {};

function types(schema: Schema): Set<string> | undefined {
  const t = schema['type'];
  if (t === undefined) return undefined;
  return new Set([t].flat() as string[]);
}

/** a accepts everything b does, as far as `type` goes (integer is a number). */
function typesCover(a: Set<string> | undefined, b: Set<string> | undefined): boolean {
  if (a === undefined) return true;
  if (b === undefined) return false;
  for (const t of b) if (!a.has(t) && !(t === 'integer' && a.has('number'))) return false;
  return true;
}

const num = (value: unknown): number | undefined => (typeof value === 'number' ? value : undefined);

/** Request side: `next` must accept every value `base` accepts. */
function requestNarrowing(base: Schema, next: Schema, at: string, out: string[]): void {
  if (base['$ref'] !== next['$ref']) out.push(`${at}: now refers to ${String(next['$ref'])}`);
  if (!typesCover(types(next), types(base))) out.push(`${at}: type narrowed`);
  const nextEnum = next['enum'] as unknown[] | undefined;
  const baseEnum = base['enum'] as unknown[] | undefined;
  if (nextEnum !== undefined && (baseEnum === undefined || baseEnum.some((v) => !nextEnum.includes(v))))
    out.push(`${at}: enum values removed`);
  for (const key of ['maxLength', 'maximum', 'maxItems', 'maxProperties']) {
    const b = num(base[key]) ?? Infinity;
    const n = num(next[key]) ?? Infinity;
    if (n < b) out.push(`${at}: ${key} lowered`);
  }
  for (const key of ['minLength', 'minimum', 'minItems', 'minProperties']) {
    const b = num(base[key]) ?? -Infinity;
    const n = num(next[key]) ?? -Infinity;
    if (n > b) out.push(`${at}: ${key} raised`);
  }
  if (next['pattern'] !== undefined && next['pattern'] !== base['pattern']) out.push(`${at}: pattern changed`);
  const baseRequired = new Set((base['required'] as string[] | undefined) ?? []);
  for (const field of (next['required'] as string[] | undefined) ?? [])
    if (!baseRequired.has(field)) out.push(`${at}.${field}: newly required`);
  const baseProps = asSchema(base['properties']);
  const nextProps = asSchema(next['properties']);
  const closed = next['additionalProperties'] === false;
  if (closed && base['additionalProperties'] !== false && base['type'] === 'object')
    out.push(`${at}: additional properties now refused`);
  for (const [name, schema] of Object.entries(baseProps)) {
    if (!(name in nextProps)) {
      if (closed) out.push(`${at}.${name}: removed (now refused)`);
      continue;
    }
    requestNarrowing(asSchema(schema), asSchema(nextProps[name]), `${at}.${name}`, out);
  }
  if (base['items'] !== undefined || next['items'] !== undefined)
    requestNarrowing(asSchema(base['items']), asSchema(next['items']), `${at}[]`, out);
}

/** Response side: whatever `next` answers, a client of `base` must still read. */
function responseWidening(base: Schema, next: Schema, at: string, out: string[]): void {
  if (base['$ref'] !== next['$ref']) out.push(`${at}: now refers to ${String(next['$ref'])}`);
  if (!typesCover(types(base), types(next))) out.push(`${at}: type widened`);
  const baseEnum = base['enum'] as unknown[] | undefined;
  const nextEnum = next['enum'] as unknown[] | undefined;
  if (baseEnum !== undefined && (nextEnum === undefined || nextEnum.some((v) => !baseEnum.includes(v))))
    out.push(`${at}: new enum values`);
  const nextRequired = new Set((next['required'] as string[] | undefined) ?? []);
  for (const field of (base['required'] as string[] | undefined) ?? [])
    if (!nextRequired.has(field)) out.push(`${at}.${field}: no longer always present`);
  const baseProps = asSchema(base['properties']);
  const nextProps = asSchema(next['properties']);
  for (const [name, schema] of Object.entries(baseProps)) {
    if (!(name in nextProps)) {
      out.push(`${at}.${name}: removed`);
      continue;
    }
    responseWidening(asSchema(schema), asSchema(nextProps[name]), `${at}.${name}`, out);
  }
  if (base['items'] !== undefined) responseWidening(asSchema(base['items']), asSchema(next['items']), `${at}[]`, out);
}

/** The breaking changes from `base` to `next` under `prefix` (default /v2), one line each; [] when none. */
export function breakingChanges(base: unknown, next: unknown, prefix = '/v2'): string[] {
  const out: string[] = [];
  const basePaths = (base as Doc).paths ?? {};
  const nextPaths = (next as Doc).paths ?? {};
  for (const [path, baseItem] of Object.entries(basePaths)) {
    if (path !== prefix && !path.startsWith(`${prefix}/`)) continue;
    const nextItem = nextPaths[path];
    if (nextItem === undefined) {
      out.push(`${path}: removed`);
      continue;
    }
    for (const method of METHODS) {
      const b = baseItem[method];
      if (b === undefined) continue;
      const n = nextItem[method];
      const at = `${method.toUpperCase()} ${path}`;
      if (n === undefined) {
        out.push(`${at}: removed`);
        continue;
      }
      const params = (op: Schema) =>
        new Map(
          ((op['parameters'] as Schema[] | undefined) ?? []).map((p) => [`${String(p['in'])}:${String(p['name'])}`, p]),
        );
      const baseParams = params(b);
      const nextParams = params(n);
      for (const [id, p] of baseParams) {
        const np = nextParams.get(id);
        if (np === undefined) out.push(`${at} parameter ${id}: removed`);
        else requestNarrowing(asSchema(p['schema']), asSchema(np['schema']), `${at} parameter ${id}`, out);
      }
      for (const [id, p] of nextParams)
        if (!baseParams.has(id) && p['required'] === true) out.push(`${at} parameter ${id}: new and required`);

      const bodyOf = (op: Schema) => asSchema(asSchema(asSchema(op['requestBody'])['content'])['application/json']);
      if (b['requestBody'] === undefined && asSchema(n['requestBody'])['required'] === true)
        out.push(`${at}: a body is now required`);
      if (b['requestBody'] !== undefined && n['requestBody'] !== undefined)
        requestNarrowing(asSchema(bodyOf(b)['schema']), asSchema(bodyOf(n)['schema']), `${at} body`, out);

      const baseResponses = asSchema(b['responses']);
      const nextResponses = asSchema(n['responses']);
      for (const [status, response] of Object.entries(baseResponses)) {
        const nr = nextResponses[status];
        if (nr === undefined) {
          out.push(`${at} response ${status}: removed`);
          continue;
        }
        const baseContent = asSchema(asSchema(response)['content']);
        const nextContent = asSchema(asSchema(nr)['content']);
        for (const [type, media] of Object.entries(baseContent)) {
          const nm = nextContent[type];
          if (nm === undefined) out.push(`${at} response ${status} ${type}: removed`);
          else
            responseWidening(
              asSchema(asSchema(media)['schema']),
              asSchema(asSchema(nm)['schema']),
              `${at} response ${status}`,
              out,
            );
        }
      }
    }
  }
  return out;
}
