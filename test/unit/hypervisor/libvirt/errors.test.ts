import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcError } from '../../../../src/core/errors.js';
import { classifyFailure, toSvcError } from '../../../../src/hypervisor/libvirt/errors.js';
import { TimeoutError } from '../../../../src/util/deadline.js';

// Messages as libvirt 9 (test, remote drivers) words them; the binding passes only the text.
test('libvirt messages are classified', () => {
  const cases: [string, string][] = [
    ['Domain not found', 'not-found'],
    ["Domain not found: no domain with matching name 'x'", 'not-found'],
    ["operation failed: domain 'a1' already exists with uuid 78580273-84df-4b14-985e-c8df9526273f", 'already-exists'],
    ["internal error: Domain 'a1' is already running", 'already-active'],
    ['Requested operation is not valid: domain is already running', 'already-active'],
    ["internal error: domain 'a1' not running", 'not-active'],
    ['Requested operation is not valid: domain is not running', 'not-active'],
    ["internal error: domain 'a1' not paused", 'not-paused'],
    ["Failed to connect socket to '/nonexistent.sock': No such file or directory", 'unavailable'],
    ['End of file while reading data: Input/output error', 'unavailable'],
    ['Cannot write data: Broken pipe', 'unavailable'],
    ['internal error: client socket is closed', 'unavailable'],
    ['this function is not supported by the connection driver: virDomainPMSuspendForDuration', 'other'],
  ];
  for (const [msg, kind] of cases) assert.equal(classifyFailure(msg), kind, msg);
  assert.equal(classifyFailure(new TimeoutError('x')), 'timeout');
  assert.equal(classifyFailure(new SvcError('VM_RUNNING', 'connection refused in a message of ours')), 'other');
});

test('failures become table errors with the VM name and never lose availability details', () => {
  const ctx = { name: 'agent-a', host: 'qemu:///system', op: 'start', retryAfterSeconds: 7 };
  assert.equal(toSvcError('Domain not found', ctx).code, 'VM_NOT_FOUND');
  assert.equal(toSvcError('Domain not found', ctx).message, "VM 'agent-a' not found");
  assert.equal(toSvcError("Domain 'agent-a' is already running", ctx).code, 'VM_RUNNING');
  assert.equal(toSvcError('domain is not running', ctx).code, 'VM_NOT_RUNNING');
  const down = toSvcError('Cannot recv data: Connection reset by peer', ctx);
  assert.equal(down.code, 'HYPERVISOR_UNAVAILABLE');
  assert.deepEqual(down.details, { host: 'qemu:///system', retryAfterSeconds: 7 });
  const other = toSvcError(new Error('unsupported configuration: bad thing\n<domain>…</domain>'), ctx);
  assert.equal(other.code, 'LIBVIRT_ERROR');
  assert.equal(other.message, 'start agent-a failed: unsupported configuration: bad thing');
});
