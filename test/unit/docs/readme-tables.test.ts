import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { repoRoot } from '../../support/paths.js';
import { readmeTables } from '../../support/readme-tables.js';

test('every generated README table matches the code it documents', () => {
  const readme = readFileSync(`${repoRoot}/README.md`, 'utf8');
  for (const [name, table] of Object.entries(readmeTables())) {
    const begin = `<!-- ${name}:begin -->`;
    const end = `<!-- ${name}:end -->`;
    const from = readme.indexOf(begin);
    const to = readme.indexOf(end);
    assert.ok(from >= 0 && to > from, `README.md must hold the ${name} markers`);
    assert.equal(readme.slice(from + begin.length, to).trim(), table, `${name} drifted: run \`npm run build && npm run docs\``);
  }
});
