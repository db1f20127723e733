/**
 * Test helpers for the wire contract: the .proto loaded at run time through protobufjs
 * reflection (independent of the generated static code), and fast-check arbitraries that build
 * a random plain object for any message type of it, every field kind included.
 */
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { AGENT_PROTO_PATH } from '../../../proto/index.js';

/** The contract as protobufjs reflection sees it (camelCase field names, like the static code). */
export function loadContract(): protobuf.Root {
  const root = protobuf.loadSync(AGENT_PROTO_PATH);
  root.resolveAll();
  return root;
}

/** Conversion used to compare messages: numbers for 64-bit, base64 for bytes, no defaults. */
export const COMPARE = { longs: Number, bytes: String, enums: Number, defaults: false } as const;

const I32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

function scalarArbitrary(type: string): fc.Arbitrary<unknown> {
  switch (type) {
    case 'string':
      return fc.string({ unit: 'grapheme', maxLength: 12 });
    case 'bytes':
      return fc.uint8Array({ maxLength: 48 });
    case 'bool':
      return fc.boolean();
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      return fc.integer(I32);
    case 'uint32':
    case 'fixed32':
      return fc.integer({ min: 0, max: 2 ** 32 - 1 });
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      return fc.maxSafeInteger();
    case 'uint64':
    case 'fixed64':
      return fc.maxSafeNat();
    case 'float':
      return fc.float({ noNaN: true });
    case 'double':
      return fc.double({ noNaN: true });
    default:
      throw new Error(`no arbitrary for scalar type ${type}`);
  }
}

function valueArbitrary(field: protobuf.Field, depth: number): fc.Arbitrary<unknown> {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return fc.constantFrom(...Object.values(resolved.values));
  if (resolved instanceof protobuf.Type) return messageArbitrary(resolved, depth + 1);
  return scalarArbitrary(field.type);
}

function fieldArbitrary(field: protobuf.Field, depth: number): fc.Arbitrary<unknown> {
  const value = valueArbitrary(field, depth);
  if (field instanceof protobuf.MapField) {
    // "__proto__" is not a usable key of a plain JS object on either side; skip it.
    const key = fc.string({ unit: 'grapheme', maxLength: 8 }).filter((k) => k !== '__proto__');
    return fc.dictionary(key, value, { maxKeys: 3 });
  }
  if (field.repeated) return fc.array(value, { maxLength: 3 });
  return value;
}

/**
 * A random plain object of `type`: each ordinary field present or absent, at most one member of
 * each oneof set. Nesting stops at depth 4 (the contract nests at most 3 deep).
 */
export function messageArbitrary(type: protobuf.Type, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  if (depth > 4) return fc.constant({});
  const plain: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of type.fieldsArray) {
    if (field.partOf === null) plain[field.name] = fieldArbitrary(field, depth);
  }
  const parts: fc.Arbitrary<Record<string, unknown>>[] = [fc.record(plain, { requiredKeys: [] })];
  for (const oneof of type.oneofsArray) {
    const members = oneof.fieldsArray.map((f) => fieldArbitrary(f, depth).map((v) => ({ [f.name]: v })));
    parts.push(fc.oneof(fc.constant({}), ...members));
  }
  return fc.tuple(...parts).map((objs) => Object.assign({}, ...objs) as Record<string, unknown>);
}

/** Names of the members of `type`'s oneof `oneofName` (e.g. AgentMessage.payload). */
export function oneofMembers(type: protobuf.Type, oneofName: string): protobuf.Field[] {
  const oneof = type.oneofs?.[oneofName];
  if (oneof === undefined) throw new Error(`${type.fullName} has no oneof ${oneofName}`);
  return oneof.fieldsArray;
}
