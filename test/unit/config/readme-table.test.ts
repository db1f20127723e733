import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { configMarkdownTable } from '../../../src/config/load.js';
import { repoRoot } from '../../support/paths.js';

test('the README configuration table is the one generated from the schema', () => {
  const readme = readFileSync(`${repoRoot}/README.md`, 'utf8');
  const begin = '<!-- config-table:begin -->';
  const end = '<!-- config-table:end -->';
  const from = readme.indexOf(begin);
  const to = readme.indexOf(end);
  assert.ok(from >= 0 && to > from, 'README.md must hold the config table between the config-table markers');
  const actual = readme.slice(from + begin.length, to).trim();
  assert.equal(actual, configMarkdownTable(), 'README table drifted: run `npm run build && npm run docs`');
});
