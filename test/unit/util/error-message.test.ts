import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { errorMessage } from '../../../src/util/error-message.js';

void describe('errorMessage', () => {
  void test('an Error gives its message, without the class name', () => {
    assert.equal(errorMessage(new TypeError('bad input')), 'bad input');
    assert.equal(errorMessage(new SvcError('request.invalid', 'limit must be ≥ 1')), 'limit must be ≥ 1');
  });

  void test('anything else is turned into a string', () => {
    assert.equal(errorMessage('plain text'), 'plain text');
    assert.equal(errorMessage(42), '42');
    assert.equal(errorMessage(undefined), 'undefined');
    assert.equal(errorMessage(null), 'null');
    assert.equal(errorMessage({ toString: () => 'custom' }), 'custom');
  });

  void test('a value String() cannot convert still gives text', () => {
    assert.equal(errorMessage(Object.create(null)), '[object Object]');
    assert.equal(
      errorMessage({
        toString: () => {
          throw new Error('no');
        },
      }),
      '[object Object]',
    );
  });
});
