/**
 * Finds the external programs the project's sources spawn, by reading their syntax trees (the
 * TypeScript parser; nothing is run). test/unit/setup/programs.test.ts checks every program it
 * finds against src/setup/programs.mjs, so a new spawn of a program nobody installs fails a test
 * instead of a fresh machine.
 *
 * What counts as a spawn site, with a literal program name (a string, a `const` holding one, a
 * `?? 'default'`, either branch of `?:`, or `process.execPath`, which is node):
 *   - the first argument of a function imported from node:child_process or node-pty (any alias,
 *     also through `promisify` or `await import`), of the project's run helper (`run` imported
 *     from a run.js) and of local helpers that pass their first parameter on to one of those; the
 *     first word of exec/execSync's command line; fork (node);
 *   - the first element of an argv array literal handed to a known argv wrapper (`inRoot`,
 *     `chrootArgs`, `execArgv`) or returned by a function whose name ends in `Argv`;
 *   - guest-workspace's `startCollecting(…, command, args)` (the agent spawns it);
 *   - playwright's `executablePath`.
 * Matching by import, not by name, keeps `run('sha256', …)` of the job pool out. `env`, `sudo`
 * and `unshare … --` count, and so does the program after them when the argv array is written out
 * at the call. Programs named only inside shell scripts (`sh -c '…'`) or chosen at run time (a
 * user's command, a path into an unpacked package) are beyond it: the table lists those by hand.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import ts from 'typescript';

export interface SpawnSite {
  /** Path as given to {@link scanSource} (repository-relative from {@link scanTree}). */
  readonly file: string;
  /** 1-based. */
  readonly line: number;
  /** The program's file name (a path is reduced to its base name). */
  readonly program: string;
}

/** Modules whose exports start processes. */
const PROCESS_MODULES: ReadonlySet<string> = new Set(['node:child_process', 'child_process', 'node-pty']);
/** Of their exports, the ones that take a shell command line (fork runs a node module). */
const SHELL_LINE: ReadonlySet<string> = new Set(['exec', 'execSync']);
/** Project functions that take the program at the index (and its argv right after). */
const PROGRAM_AT: ReadonlyMap<string, number> = new Map([
  // src/tasks/guest-workspace.ts: (commands, o, commandId, command, args, …), run by the agent.
  ['startCollecting', 3],
]);
/** Project functions that take a whole argv (program first) at the index. */
const ARGV_AT: ReadonlyMap<string, number> = new Map([
  ['inRoot', 1],
  ['chrootArgs', 1],
  ['execArgv', 0],
]);

type Spawner = 'program' | 'shell' | 'fork';

/** How an export of a process module takes its program. */
const kindOf = (exported: string): Spawner => (SHELL_LINE.has(exported) ? 'shell' : exported === 'fork' ? 'fork' : 'program');

/** Every spawn site of one source text. */
export function scanSource(file: string, text: string): SpawnSite[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS);
  const strings = constStrings(sf);
  const { spawners, namespaces } = spawnersOf(sf);
  const sites: SpawnSite[] = [];
  const add = (node: ts.Node, program: string): void => {
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    sites.push({ file, line, program: basename(program) });
  };
  /** The program and, for env/sudo/unshare, the one it runs (from the argv elements after it). */
  const addWithArgv = (node: ts.Node, programs: readonly string[], argv: readonly ts.Expression[] | undefined): void => {
    for (const p of programs) {
      add(node, p);
      if (argv === undefined) continue;
      const inner = wrapped(basename(p), argv);
      if (inner !== undefined) addWithArgv(inner, literals(inner, strings), argv.slice(argv.indexOf(inner) + 1));
    }
  };
  const fromArgvArray = (node: ts.Node, arr: ts.ArrayLiteralExpression): void => {
    const [first, ...rest] = arr.elements;
    if (first !== undefined && !ts.isSpreadElement(first)) addWithArgv(node, literals(first, strings), rest);
  };
  const arrayAt = (call: ts.CallExpression, i: number): readonly ts.Expression[] | undefined => {
    const a = call.arguments[i];
    return a !== undefined && ts.isArrayLiteralExpression(a) ? a.elements : undefined;
  };
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const e = node.expression;
      const name = ts.isIdentifier(e)
        ? e.text
        : ts.isPropertyAccessExpression(e) && ts.isIdentifier(e.expression) && namespaces.has(e.expression.text)
          ? e.name.text
          : undefined;
      const kind = name === undefined ? undefined : ts.isIdentifier(e) ? spawners.get(name) : kindOf(name);
      const at = name === undefined ? undefined : PROGRAM_AT.get(name);
      const argvAt = name === undefined ? undefined : ARGV_AT.get(name);
      if (kind === 'program') addWithArgv(node, literals(node.arguments[0], strings), arrayAt(node, 1));
      else if (kind === 'fork') add(node, 'node');
      else if (kind === 'shell') for (const line of literals(node.arguments[0], strings)) add(node, line.trim().split(/\s+/)[0] ?? '');
      else if (at !== undefined) addWithArgv(node, literals(node.arguments[at], strings), arrayAt(node, at + 1));
      else if (argvAt !== undefined) {
        const arr = node.arguments[argvAt];
        if (arr !== undefined && ts.isArrayLiteralExpression(arr)) fromArgvArray(node, arr);
      }
    } else if (
      ts.isReturnStatement(node) &&
      node.expression !== undefined &&
      ts.isArrayLiteralExpression(node.expression) &&
      /Argv$/.test(enclosingFunctionName(node) ?? '')
    ) {
      fromArgvArray(node, node.expression);
    } else if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name) && node.name.text === 'executablePath') {
      for (const p of literals(node.initializer, strings)) add(node, p);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return sites;
}

/**
 * Names in the file that start a process: imports of child_process and node-pty (under any
 * alias), `promisify` of one, the project's run helper (an import from a `run.js`), and local
 * functions that hand their first parameter to one of these as the program (a run helper).
 * `namespaces` are `import * as cp` names, whose members are such functions.
 */
function spawnersOf(sf: ts.SourceFile): { spawners: Map<string, Spawner>; namespaces: Set<string> } {
  const spawners = new Map<string, Spawner>();
  const namespaces = new Set<string>();
  for (const st of sf.statements) {
    if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier)) continue;
    const from = st.moduleSpecifier.text;
    const bindings = st.importClause?.namedBindings;
    if (bindings !== undefined && ts.isNamespaceImport(bindings) && PROCESS_MODULES.has(from)) namespaces.add(bindings.name.text);
    if (bindings === undefined || !ts.isNamedImports(bindings)) continue;
    for (const el of bindings.elements) {
      const imported = (el.propertyName ?? el.name).text;
      if (el.isTypeOnly) continue;
      if (PROCESS_MODULES.has(from)) spawners.set(el.name.text, kindOf(imported));
      else if (/(^|\/)run\.js$/.test(from) && imported === 'run') spawners.set(el.name.text, 'program');
    }
  }
  // Dynamic imports, promisified spawners and local run helpers, to a fixed point (a helper may use another).
  for (let grew = true; grew;) {
    grew = false;
    const visit = (n: ts.Node): void => {
      let name: string | undefined;
      let kind: Spawner | undefined;
      if (
        ts.isVariableDeclaration(n) &&
        ts.isObjectBindingPattern(n.name) &&
        n.initializer !== undefined &&
        dynamicImportOf(n.initializer) !== undefined
      ) {
        for (const el of n.name.elements) {
          const imported =
            el.propertyName !== undefined && ts.isIdentifier(el.propertyName)
              ? el.propertyName.text
              : ts.isIdentifier(el.name)
                ? el.name.text
                : '';
          if (ts.isIdentifier(el.name) && !spawners.has(el.name.text)) {
            spawners.set(el.name.text, kindOf(imported));
            grew = true;
          }
        }
      } else if (
        ts.isVariableDeclaration(n) &&
        ts.isIdentifier(n.name) &&
        n.initializer !== undefined &&
        ts.isCallExpression(n.initializer) &&
        ts.isIdentifier(n.initializer.expression) &&
        n.initializer.expression.text === 'promisify'
      ) {
        const arg = n.initializer.arguments[0];
        name = n.name.text;
        kind = arg !== undefined && ts.isIdentifier(arg) ? spawners.get(arg.text) : undefined;
      } else if (ts.isFunctionDeclaration(n) && n.name !== undefined && n.body !== undefined) {
        const first = n.parameters[0]?.name;
        name = n.name.text;
        kind = first !== undefined && ts.isIdentifier(first) && passesAsProgram(n.body, first.text, spawners) ? 'program' : undefined;
      }
      if (name !== undefined && kind !== undefined && !spawners.has(name)) {
        spawners.set(name, kind);
        grew = true;
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return { spawners, namespaces };
}

/** The module of `await import('node:child_process')` (or node-pty), or undefined. */
function dynamicImportOf(e: ts.Expression): string | undefined {
  const call = ts.isAwaitExpression(e) ? e.expression : e;
  if (!ts.isCallExpression(call) || call.expression.kind !== ts.SyntaxKind.ImportKeyword) return undefined;
  const spec = call.arguments[0];
  return spec !== undefined && ts.isStringLiteralLike(spec) && PROCESS_MODULES.has(spec.text) ? spec.text : undefined;
}

/** True when `body` calls a program spawner with the identifier `param` as the program. */
function passesAsProgram(body: ts.Node, param: string, spawners: ReadonlyMap<string, Spawner>): boolean {
  let found = false;
  const visit = (n: ts.Node): void => {
    if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && spawners.get(n.expression.text) === 'program') {
      const a = n.arguments[0];
      if (a !== undefined && ts.isIdentifier(a) && a.text === param) found = true;
    }
    if (!found) ts.forEachChild(n, visit);
  };
  visit(body);
  return found;
}

/** Every spawn site in the source files (.ts, .mjs, .js, .cjs) under `dirs` of `root`. */
export function scanTree(root: string, dirs: readonly string[]): SpawnSite[] {
  const out: SpawnSite[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // a folder this checkout lacks
    }
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory() && e.name !== 'node_modules' && e.name !== 'vendor') walk(p);
      else if (e.isFile() && /\.(ts|mjs|js|cjs)$/.test(e.name) && !e.name.endsWith('.d.ts'))
        out.push(...scanSource(relative(root, p), readFileSync(p, 'utf8')));
    }
  };
  for (const d of dirs) walk(join(root, d));
  return out;
}

function enclosingFunctionName(node: ts.Node): string | undefined {
  for (let n: ts.Node | undefined = node.parent; n !== undefined; n = n.parent) {
    if (ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n)) return n.name?.getText();
    if ((ts.isArrowFunction(n) || ts.isFunctionExpression(n)) && ts.isVariableDeclaration(n.parent)) return n.parent.name.getText();
    if (ts.isFunctionLike(n)) return undefined;
  }
  return undefined;
}

/** The argv element naming the program that `wrapper` runs, when it is written out. */
function wrapped(wrapper: string, argv: readonly ts.Expression[]): ts.Expression | undefined {
  if (wrapper === 'unshare') {
    const dashes = argv.findIndex((e) => ts.isStringLiteralLike(e) && e.text === '--');
    return dashes < 0 ? undefined : argv[dashes + 1];
  }
  if (wrapper !== 'env' && wrapper !== 'sudo') return undefined;
  for (const e of argv) {
    if (ts.isSpreadElement(e)) return undefined;
    const head = ts.isStringLiteralLike(e) ? e.text : ts.isTemplateExpression(e) ? e.head.text : undefined;
    if (head !== undefined && (head.startsWith('-') || (wrapper === 'env' && /^[A-Za-z_][A-Za-z0-9_]*=/.test(head)))) continue;
    return e;
  }
  return undefined;
}

/** The string values an expression can have, as far as literals tell (empty when unknown). */
function literals(e: ts.Expression | undefined, strings: ReadonlyMap<string, readonly string[]>): string[] {
  if (e === undefined) return [];
  if (ts.isStringLiteralLike(e)) return [e.text];
  if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isNonNullExpression(e)) return literals(e.expression, strings);
  if (ts.isIdentifier(e)) return [...(strings.get(e.text) ?? [])];
  if (ts.isConditionalExpression(e)) return [...literals(e.whenTrue, strings), ...literals(e.whenFalse, strings)];
  if (
    ts.isBinaryExpression(e) &&
    (e.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken || e.operatorToken.kind === ts.SyntaxKind.BarBarToken)
  ) {
    return [...literals(e.left, strings), ...literals(e.right, strings)];
  }
  if (ts.isPropertyAccessExpression(e) && e.getText() === 'process.execPath') return ['node'];
  return [];
}

/**
 * String values of the file's names: `const X = 'literal'` (or `a ?? 'literal'`, …) and defaults
 * (`x = 'literal'` in a parameter or destructuring). A name bound to several literals has them all.
 */
function constStrings(sf: ts.SourceFile): Map<string, string[]> {
  const m = new Map<string, string[]>();
  const visit = (n: ts.Node): void => {
    if (
      (ts.isVariableDeclaration(n) || ts.isParameter(n) || ts.isBindingElement(n)) &&
      ts.isIdentifier(n.name) &&
      n.initializer !== undefined
    ) {
      const values = literals(n.initializer, m);
      if (values.length > 0 && (!ts.isVariableDeclaration(n) || (n.parent.flags & ts.NodeFlags.Const) !== 0))
        m.set(n.name.text, [...(m.get(n.name.text) ?? []), ...values]);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return m;
}
