/**
 * Dispatch bearer tokens (src/missions/executor-token.ts): the header is read as RFC 7235 says,
 * only the issued token matches, and a wrong token of any length (or none) is refused without an
 * exception — timingSafeEqual throws on unequal lengths, which is why both sides are hashed first.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bearerOf, hashToken, matchToken, newExecutorToken, TOKEN_PREFIX } from '../../../src/missions/executor-token.js';

test('bearerOf takes the token of a Bearer header and nothing else', () => {
  assert.equal(bearerOf(undefined), '');
  assert.equal(bearerOf('Bearer abc'), 'abc');
  assert.equal(bearerOf('bearer  abc '), 'abc');
  assert.equal(bearerOf('BEARER abc'), 'abc');
  assert.equal(bearerOf('Basic abc'), '');
  assert.equal(bearerOf('Bearer'), '');
  assert.equal(bearerOf('Bearer a b'), '');
  assert.equal(bearerOf('Bearerabc'), '');
});

test('tokens are 256 random bits behind a recognisable prefix, and distinct', () => {
  const a = newExecutorToken();
  const b = newExecutorToken();
  assert.ok(a.startsWith(TOKEN_PREFIX));
  assert.equal(Buffer.from(a.slice(TOKEN_PREFIX.length), 'base64url').length, 32);
  assert.notEqual(a, b);
});

test('only the issued token matches its executor; wrong tokens of every length and none match nothing', () => {
  const tokens = [newExecutorToken(), newExecutorToken(), newExecutorToken()];
  const executors = tokens.map((t, i) => ({ id: `exe-${i}`, tokenHash: hashToken(t) }));
  tokens.forEach((t, i) => assert.equal(matchToken(t, executors), `exe-${i}`));
  const good = tokens[1] as string;
  const wrong = [
    '',
    'x',
    `${good.slice(0, -1)}${good.endsWith('A') ? 'B' : 'A'}`,
    good.slice(0, -1),
    `${good}x`,
    good.toUpperCase(),
    'x'.repeat(10_000),
  ];
  for (const w of wrong) assert.equal(matchToken(w, executors), undefined, `matched ${w.slice(0, 20)}`);
  assert.equal(matchToken(good, []), undefined);
});
