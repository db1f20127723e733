/**
 * Loads actor type tables from module URLs (each module exports `actorTypes`). Used by every
 * shard worker and by inline mode, so both run exactly the same factories. A module may also
 * export `mainThreadActorTypes`: the names of its types whose actors live on the main thread in
 * every mode (ActorSystemOptions, "Placement").
 */
import type { ActorFactory } from './actor.js';

/** type name → factory. */
export type ActorTypes = ReadonlyMap<string, ActorFactory>;

/**
 * Imports each module and merges their `actorTypes`. Rejects when a module lacks the export,
 * an entry is not a function, or two modules define the same type name.
 */
export async function loadActorTypes(moduleUrls: readonly string[]): Promise<ActorTypes> {
  const types = new Map<string, ActorFactory>();
  for (const url of moduleUrls) {
    const mod = (await import(url)) as { actorTypes?: unknown };
    const table = mod.actorTypes;
    if (typeof table !== 'object' || table === null) {
      throw new TypeError(`actor module ${url} does not export actorTypes`);
    }
    for (const [name, factory] of Object.entries(table)) {
      if (typeof factory !== 'function') throw new TypeError(`actorTypes.${name} in ${url} is not a function`);
      if (types.has(name)) throw new TypeError(`actor type ${name} is defined twice (again in ${url})`);
      types.set(name, factory as ActorFactory);
    }
  }
  return types;
}

/**
 * The types the modules place on the main thread (their `mainThreadActorTypes` exports, each a
 * list of type names). Rejects with a TypeError for an export that is not a list of strings.
 */
export async function loadMainThreadTypes(moduleUrls: readonly string[]): Promise<ReadonlySet<string>> {
  const names = new Set<string>();
  for (const url of moduleUrls) {
    const list = ((await import(url)) as { mainThreadActorTypes?: unknown }).mainThreadActorTypes;
    if (list === undefined) continue;
    if (!Array.isArray(list) || !list.every((n): n is string => typeof n === 'string')) {
      throw new TypeError(`mainThreadActorTypes in ${url} is not a list of type names`);
    }
    for (const n of list) names.add(n);
  }
  return names;
}
