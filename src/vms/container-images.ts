/**
 * The curated container image catalog (spec 4.16, GET /api/v1/container-images): images a
 * dashboard offers when a VM runs containerised workloads. The built-in list is
 * src/vms/container-images.json, reviewed like code and shipped with sandboxd; an operator
 * replaces it with a file of the same shape named by SVC_CONTAINER_IMAGES_FILE (read once at
 * start; an invalid file stops the start with a message naming the problem).
 *
 * Shape: {"images": [{"ref", "label", "description", "default"?}]} (a bare array is accepted
 * too); ref 1-512 characters, label 1-128, description 0-1024, at most one default, at most
 * 1000 entries, refs unique.
 */
import { readFile } from 'node:fs/promises';
import type { ContainerImage } from '../wire/vms.js';
import builtIn from './container-images.json' with { type: 'json' };

/** One catalog entry (src/wire/vms.ts). */
export type { ContainerImage };

const MAX_IMAGES = 1000;

/** Validates a catalog document; throws Error naming the entry and field. */
export function parseCatalog(doc: unknown, source: string): ContainerImage[] {
  const list = Array.isArray(doc) ? doc : typeof doc === 'object' && doc !== null ? (doc as { images?: unknown }).images : undefined;
  if (!Array.isArray(list)) throw new Error(`${source}: expected {"images": [...]} or an array`);
  if (list.length > MAX_IMAGES) throw new Error(`${source}: at most ${MAX_IMAGES} images`);
  const refs = new Set<string>();
  let defaults = 0;
  const out = list.map((raw: unknown, i): ContainerImage => {
    const at = `${source}: images[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${at} must be an object`);
    const e = raw as Record<string, unknown>;
    const extra = Object.keys(e).filter((k) => !['ref', 'label', 'description', 'default'].includes(k));
    if (extra.length > 0) throw new Error(`${at} has unknown field(s) ${extra.join(', ')}`);
    const str = (k: string, min: number, max: number): string => {
      const v = e[k] ?? (min === 0 ? '' : undefined);
      if (typeof v !== 'string' || v.length < min || v.length > max)
        throw new Error(`${at}.${k} must be a string of ${min}-${max} characters`);
      return v;
    };
    const img: ContainerImage = { ref: str('ref', 1, 512), label: str('label', 1, 128), description: str('description', 0, 1024) };
    if (refs.has(img.ref)) throw new Error(`${at}.ref ${img.ref} is listed twice`);
    refs.add(img.ref);
    if (e['default'] !== undefined) {
      if (typeof e['default'] !== 'boolean') throw new Error(`${at}.default must be a boolean`);
      img.default = e['default'];
      if (img.default) defaults++;
    }
    return img;
  });
  if (defaults > 1) throw new Error(`${source}: at most one image may be the default`);
  return out;
}

/** The catalog: the file at `overridePath` when set, else the built-in list. */
export async function loadContainerImages(overridePath: string | null): Promise<ContainerImage[]> {
  if (overridePath === null) return parseCatalog(builtIn, 'src/vms/container-images.json');
  let text: string;
  try {
    text = await readFile(overridePath, 'utf8');
  } catch (err) {
    throw new Error(`SVC_CONTAINER_IMAGES_FILE ${overridePath}: ${(err as Error).message}`, { cause: err });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`SVC_CONTAINER_IMAGES_FILE ${overridePath}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  return parseCatalog(doc, overridePath);
}
