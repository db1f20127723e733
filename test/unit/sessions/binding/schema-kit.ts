/** The binding's JSON Schema compiled with Ajv (draft 2020-12, strict, with the date-time and uri formats). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { repoRoot } from '../../../support/paths.js';

// Both packages are CommonJS with a `default` property; under NodeNext the default import is module.exports.
const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;

export const schemaPath = join(repoRoot, 'src', 'sessions', 'binding', 'pty-ws-v1.schema.json');
export const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as { $id: string; $defs: Record<string, unknown> };

// strictTuples off: argv's prefixItems constrains only its first element (non-empty), on purpose.
const ajv = new Ajv2020({ strict: true, strictTuples: false, allErrors: true });
addFormats(ajv, ['date-time', 'uri']);
ajv.addSchema(schema);

function validator(def: string): ValidateFunction {
  const v = ajv.getSchema(`${schema.$id}#/$defs/${def}`);
  if (v === undefined) throw new Error(`no $defs/${def}`);
  return v;
}

export const validateAny = ajv.getSchema(schema.$id)!;
export const validateClient = validator('ClientFrame');
export const validateServer = validator('ServerFrame');

function explain(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`).join('\n');
}

/** Throws with Ajv's errors when `frame` is not valid for `v`. */
export function assertValid(v: ValidateFunction, frame: unknown): void {
  if (!v(frame)) throw new Error(`schema rejects ${JSON.stringify(frame).slice(0, 400)}:\n${explain(v.errors)}`);
}
