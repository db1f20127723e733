/**
 * A small JSON Schema (draft 2020-12) checker and evaluator for the keywords the task manifest
 * schema uses. ajv is not a dependency; this is enough to test that the published schema is well
 * formed and that it and the hand-written validator give every fixture the same verdict.
 */

export type Schema = Record<string, unknown>;

const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'title', 'description', '$defs']);
const KEYWORDS = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'propertyNames',
  'maxProperties',
  'minProperties',
  'enum',
  'const',
  'pattern',
  'minLength',
  'maxLength',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  '$ref',
]);
const TYPES = new Set(['string', 'object', 'array', 'integer', 'number', 'boolean', 'null']);

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNonNegInt = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 0;

/** Problems with the schema itself (unknown keywords, bad keyword values, dangling $refs); [] when well formed. */
export function checkSchema(root: Schema): string[] {
  const problems: string[] = [];
  if (root['$schema'] !== 'https://json-schema.org/draft/2020-12/schema') problems.push('$schema is not draft 2020-12');
  const defs = isObj(root['$defs']) ? root['$defs'] : {};
  const visit = (s: unknown, at: string): void => {
    if (typeof s === 'boolean') return;
    if (!isObj(s)) return void problems.push(`${at}: a schema must be an object or boolean`);
    for (const [k, v] of Object.entries(s)) {
      if (ANNOTATIONS.has(k)) {
        if (k === '$defs') for (const [name, d] of Object.entries(v as object)) visit(d, `${at}/$defs/${name}`);
        else if (k !== '$comment' && k !== 'description' && k !== 'title' && typeof v !== 'string')
          problems.push(`${at}/${k}: must be a string`);
        continue;
      }
      if (!KEYWORDS.has(k)) {
        problems.push(`${at}: unknown keyword ${k}`);
        continue;
      }
      const where = `${at}/${k}`;
      switch (k) {
        case 'type':
          if (!(typeof v === 'string' ? TYPES.has(v) : Array.isArray(v) && v.every((t) => TYPES.has(t as string))))
            problems.push(`${where}: bad type`);
          break;
        case 'properties':
          if (!isObj(v)) problems.push(`${where}: must be an object`);
          else for (const [name, p] of Object.entries(v)) visit(p, `${where}/${name}`);
          break;
        case 'required':
          if (!Array.isArray(v) || !v.every((r) => typeof r === 'string') || new Set(v).size !== v.length)
            problems.push(`${where}: must be unique strings`);
          break;
        case 'enum':
          if (!Array.isArray(v) || v.length === 0) problems.push(`${where}: must be a non-empty array`);
          break;
        case 'pattern':
          try {
            new RegExp(v as string, 'u');
          } catch {
            problems.push(`${where}: not an ECMA-262 regex`);
          }
          break;
        case 'minLength':
        case 'maxLength':
        case 'minItems':
        case 'maxItems':
        case 'minProperties':
        case 'maxProperties':
          if (!isNonNegInt(v)) problems.push(`${where}: must be a non-negative integer`);
          break;
        case 'allOf':
        case 'anyOf':
        case 'oneOf':
        case 'prefixItems':
          if (!Array.isArray(v) || v.length === 0) problems.push(`${where}: must be a non-empty array`);
          else v.forEach((sub, i) => visit(sub, `${where}/${i}`));
          break;
        case 'additionalProperties':
        case 'propertyNames':
        case 'items':
        case 'not':
          visit(v, where);
          break;
        case '$ref':
          if (typeof v !== 'string' || !v.startsWith('#/$defs/') || !Object.hasOwn(defs, v.slice(8)))
            problems.push(`${where}: unresolved ${String(v)}`);
          break;
        case 'const':
          break;
      }
    }
  };
  visit(root, '#');
  return problems;
}

function codePoints(s: string): number {
  return [...s].length;
}

function typeOk(t: string, v: unknown): boolean {
  switch (t) {
    case 'string':
      return typeof v === 'string';
    case 'integer':
      return Number.isInteger(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return isObj(v);
    default:
      return false;
  }
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** True when `value` is valid against `schema` (whose $refs resolve in `root`). */
export function validates(root: Schema, value: unknown, schema: unknown = root): boolean {
  if (schema === true) return true;
  if (schema === false) return false;
  const s = schema as Schema;
  if (typeof s['$ref'] === 'string') {
    const def = (root['$defs'] as Record<string, unknown>)[s['$ref'].slice(8)];
    if (!validates(root, value, def)) return false;
  }
  if (s['type'] !== undefined) {
    const types = Array.isArray(s['type']) ? (s['type'] as string[]) : [s['type'] as string];
    if (!types.some((t) => typeOk(t, value))) return false;
  }
  if (s['enum'] !== undefined && !(s['enum'] as unknown[]).some((e) => deepEqual(e, value))) return false;
  if (Object.hasOwn(s, 'const') && !deepEqual(s['const'], value)) return false;
  if (typeof value === 'string') {
    if (typeof s['pattern'] === 'string' && !new RegExp(s['pattern'], 'u').test(value)) return false;
    if (typeof s['minLength'] === 'number' && codePoints(value) < s['minLength']) return false;
    if (typeof s['maxLength'] === 'number' && codePoints(value) > s['maxLength']) return false;
  }
  if (isObj(value)) {
    const keys = Object.keys(value);
    const props = (s['properties'] ?? {}) as Record<string, unknown>;
    for (const k of keys) {
      if (Object.hasOwn(props, k)) {
        if (!validates(root, value[k], props[k])) return false;
      } else if (s['additionalProperties'] !== undefined && !validates(root, value[k], s['additionalProperties'])) return false;
      if (s['propertyNames'] !== undefined && !validates(root, k, s['propertyNames'])) return false;
    }
    if (Array.isArray(s['required']) && !(s['required'] as string[]).every((r) => Object.hasOwn(value, r))) return false;
    if (typeof s['maxProperties'] === 'number' && keys.length > s['maxProperties']) return false;
    if (typeof s['minProperties'] === 'number' && keys.length < s['minProperties']) return false;
  }
  if (Array.isArray(value)) {
    const prefix = (s['prefixItems'] ?? []) as unknown[];
    for (let i = 0; i < value.length; i++) {
      // items applies only to the elements after prefixItems (draft 2020-12).
      const sub = i < prefix.length ? prefix[i] : s['items'];
      if (sub !== undefined && !validates(root, value[i], sub)) return false;
    }
    if (typeof s['minItems'] === 'number' && value.length < s['minItems']) return false;
    if (typeof s['maxItems'] === 'number' && value.length > s['maxItems']) return false;
  }
  if (Array.isArray(s['allOf']) && !(s['allOf'] as unknown[]).every((sub) => validates(root, value, sub))) return false;
  if (Array.isArray(s['anyOf']) && !(s['anyOf'] as unknown[]).some((sub) => validates(root, value, sub))) return false;
  if (Array.isArray(s['oneOf']) && (s['oneOf'] as unknown[]).filter((sub) => validates(root, value, sub)).length !== 1) return false;
  if (s['not'] !== undefined && validates(root, value, s['not'])) return false;
  return true;
}
