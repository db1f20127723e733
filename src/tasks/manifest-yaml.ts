/**
 * Safe loading of `manifest_yaml` text into plain data, before the manifest validator sees it.
 *
 * A manifest is small and flat, so everything a YAML parser could be made to do beyond that is
 * refused up front, with a 400 `task.invalid_manifest` naming the reason:
 * - more than {@link MAX_MANIFEST_YAML_BYTES} bytes of UTF-8, or a NUL byte anywhere;
 * - more than one document (`---` separators), or an empty document;
 * - a root that is not a mapping;
 * - explicit tags (`!!binary`, `!foo`, `!!js/function`): plain YAML types are enough, and tags are
 *   how YAML loaders have been tricked into building objects;
 * - more than {@link MAX_YAML_ALIASES} aliases (billion-laughs bombs expand aliases exponentially);
 * - nesting deeper than {@link MAX_YAML_DEPTH} or more than {@link MAX_YAML_NODES} nodes;
 * - duplicate keys and non-scalar keys (checked here in one pass: the yaml package's own
 *   duplicate check is quadratic in the number of keys).
 * The YAML 1.2 core schema is used (`yes` is a string, not true; no merge keys).
 *
 * Nesting is measured on the concrete syntax tree, which the yaml package builds iteratively,
 * before the (recursive) composer runs: a stack overflow inside the composer is caught by the
 * package, but on Node 20 it can leave V8's regexp compiler broken so that the next deep
 * document kills the process ("RegExpCompiler Allocation failed"). Deep documents therefore
 * never reach the composer.
 */
import { isAlias, isMap, isPair, isScalar, isSeq, parseDocument, Parser, type CST, type Node } from 'yaml';
import { SvcError } from '../core/errors.js';

/** Largest `manifest_yaml` accepted, in bytes of UTF-8 (64 KiB). */
export const MAX_MANIFEST_YAML_BYTES = 64 * 1024;
/** Aliases (`*name`) allowed in one document. */
export const MAX_YAML_ALIASES = 16;
/** Deepest collection nesting allowed (a manifest needs 4). */
export const MAX_YAML_DEPTH = 16;
/** Most nodes (scalars, collections, aliases) in one document. */
export const MAX_YAML_NODES = 4096;

function invalid(message: string): SvcError {
  return new SvcError('task.invalid_manifest', `manifest_yaml: ${message}`);
}

/** Line and column (1-based) of a character offset, for error messages. */
function lineCol(text: string, offset: number): string {
  let line = 1;
  let lastBreak = -1;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lastBreak = i;
    }
  }
  return `line ${line}, column ${offset - lastBreak}`;
}

/**
 * Parse manifest YAML into plain data (objects, arrays, strings, numbers, booleans, null).
 * Throws SvcError `task.invalid_manifest` on anything listed in the file comment.
 */
export function loadManifestYaml(text: string): Record<string, unknown> {
  if (Buffer.byteLength(text, 'utf8') > MAX_MANIFEST_YAML_BYTES) {
    throw invalid(`the document is larger than ${MAX_MANIFEST_YAML_BYTES} bytes`);
  }
  if (text.includes('\u0000')) throw invalid('the document contains a NUL byte');
  checkSyntaxTree(text);
  let doc;
  try {
    doc = parseDocument(text, {
      schema: 'core',
      customTags: [],
      merge: false,
      uniqueKeys: false,
      prettyErrors: false,
      strict: true,
    });
  } catch (err) {
    // The parser reports resource exhaustion as document errors; a throw is unexpected but still bad input.
    throw invalid(`the document cannot be parsed (${err instanceof Error ? err.message.slice(0, 120) : 'parser failure'})`);
  }
  const first = doc.errors[0];
  if (first !== undefined) {
    if (first.code === 'MULTIPLE_DOCS') throw invalid('only one YAML document is allowed (found a --- separator)');
    if (first.code === 'RESOURCE_EXHAUSTION') throw invalid(`nesting deeper than ${MAX_YAML_DEPTH} levels is not allowed`);
    const where = lineCol(text, first.pos[0]);
    throw invalid(`${where}: ${first.message.split('\n')[0]?.slice(0, 200) ?? 'syntax error'}`);
  }
  const warning = doc.warnings[0];
  if (warning !== undefined)
    throw invalid(`${lineCol(text, warning.pos[0])}: ${warning.message.split('\n')[0]?.slice(0, 200) ?? 'warning'}`);
  if (doc.contents === null) throw invalid('the document is empty');
  if (!isMap(doc.contents)) throw invalid('the document root must be a mapping (name: …, repository: …)');
  checkTree(doc.contents, text);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (err) {
    // yaml throws ReferenceError "Excessive alias count" for alias bombs.
    const msg = err instanceof Error ? err.message : '';
    if (/alias/iu.test(msg)) throw invalid(`too many aliases (at most ${MAX_YAML_ALIASES}); alias expansion is bounded`);
    throw invalid(`the document cannot be converted (${msg.slice(0, 120)})`);
  }
  return value as Record<string, unknown>;
}

/** Collections of the concrete syntax tree (each adds a level of nesting). */
const CST_COLLECTIONS = new Set(['block-map', 'block-seq', 'flow-collection']);

/** Documents and nesting depth from the concrete syntax tree, iteratively (see the file comment). */
function checkSyntaxTree(text: string): void {
  let documents = 0;
  for (const token of new Parser().parse(text)) {
    if (token.type !== 'document') continue;
    if (++documents > 1) throw invalid('only one YAML document is allowed (found a --- separator)');
    const stack: Array<{ token: CST.Token | null | undefined; depth: number }> = [{ token: token.value, depth: 0 }];
    while (stack.length > 0) {
      const { token: t, depth } = stack.pop() as { token: CST.Token | null | undefined; depth: number };
      if (t === null || t === undefined) continue;
      const d = CST_COLLECTIONS.has(t.type) ? depth + 1 : depth;
      if (d > MAX_YAML_DEPTH) throw invalid(`nesting deeper than ${MAX_YAML_DEPTH} levels is not allowed`);
      if ('items' in t && Array.isArray(t.items)) {
        for (const item of t.items as Array<{ key?: CST.Token | null; value?: CST.Token | null }>) {
          stack.push({ token: item.key, depth: d }, { token: item.value, depth: d });
        }
      }
    }
  }
}

/**
 * One iterative pass over the syntax tree: node count, depth, alias count, tags, key types,
 * duplicate keys. Iterative so a hostile document cannot overflow the stack here.
 */
function checkTree(root: Node, text: string): void {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: root, depth: 1 }];
  let nodes = 0;
  let aliases = 0;
  while (stack.length > 0) {
    const { node, depth } = stack.pop() as { node: unknown; depth: number };
    if (node === null || node === undefined) continue;
    if (++nodes > MAX_YAML_NODES) throw invalid(`the document has more than ${MAX_YAML_NODES} nodes`);
    const at = (n: { range?: readonly number[] | null | undefined }): string => lineCol(text, n.range?.[0] ?? 0);
    if (isAlias(node)) {
      if (++aliases > MAX_YAML_ALIASES) throw invalid(`too many aliases (at most ${MAX_YAML_ALIASES}); alias expansion is bounded`);
      continue;
    }
    if (!isScalar(node) && !isMap(node) && !isSeq(node)) throw invalid('unsupported YAML node');
    if (node.tag !== undefined) throw invalid(`${at(node)}: explicit tags such as ${node.tag.slice(0, 40)} are not allowed`);
    if (depth > MAX_YAML_DEPTH && !isScalar(node)) throw invalid(`nesting deeper than ${MAX_YAML_DEPTH} levels is not allowed`);
    if (isSeq(node)) {
      for (const item of node.items) stack.push({ node: item, depth: depth + 1 });
    } else if (isMap(node)) {
      const seen = new Set<string>();
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const key = pair.key;
        if (!isScalar(key) || (typeof key.value !== 'string' && typeof key.value !== 'number' && typeof key.value !== 'boolean')) {
          throw invalid(`${isScalar(key) || isMap(key) || isSeq(key) ? `${at(key)}: ` : ''}mapping keys must be plain strings`);
        }
        if (key.tag !== undefined) throw invalid(`${at(key)}: explicit tags are not allowed`);
        const name = String(key.value);
        if (seen.has(name)) throw invalid(`${at(key)}: duplicate key ${JSON.stringify(name.slice(0, 64))}`);
        seen.add(name);
        nodes++;
        stack.push({ node: pair.value, depth: depth + 1 });
      }
    }
  }
}
