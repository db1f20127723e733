import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ERROR_TABLE, SvcError, fromWire, toWire } from '../../../src/core/errors.js';

describe('error table', () => {
  test('the spec-given statuses hold', () => {
    assert.equal(ERROR_TABLE.VM_NOT_FOUND.http, 404);
    assert.equal(ERROR_TABLE.VM_RUNNING.http, 409);
    assert.equal(ERROR_TABLE.VM_NOT_RUNNING.http, 409);
    assert.equal(ERROR_TABLE.VM_ALREADY_EXISTS.http, 409);
    assert.equal(ERROR_TABLE.INVALID_VM_NAME.http, 400);
    assert.equal(ERROR_TABLE.OPERATION_NOT_FOUND.http, 404);
    assert.equal(ERROR_TABLE['idempotency.key_conflict'].http, 409);
    assert.equal(ERROR_TABLE['idempotency.in_progress'].http, 409);
    assert.equal(ERROR_TABLE['session_backend.not_implemented'].http, 501);
    assert.equal(ERROR_TABLE['route.retired'].http, 410);
  });

  test('every code has a 4xx/5xx status and a non-OK gRPC status', () => {
    for (const [code, e] of Object.entries(ERROR_TABLE)) {
      assert.ok(e.http >= 400 && e.http < 600, code);
      assert.ok(e.grpc > 0, code);
    }
  });

  test('errors survive a thread boundary as plain objects', () => {
    const err = new SvcError('VM_NOT_FOUND', 'no VM agent-x', { name: 'agent-x' });
    const wire = structuredClone(toWire(err));
    const back = fromWire(wire);
    assert.equal(back.code, 'VM_NOT_FOUND');
    assert.equal(back.message, 'no VM agent-x');
    assert.deepEqual(back.details, { name: 'agent-x' });
    assert.equal(back.httpStatus, 404);
  });

  test('unknown errors never leak their message', () => {
    assert.deepEqual(toWire(new Error('password=hunter2')), { code: 'server.internal', message: 'internal error' });
    assert.equal(fromWire({ code: 'nonsense' as never, message: 'x' }).code, 'server.internal');
  });
});
