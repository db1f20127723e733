import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  defaultVmForm,
  suggestVmName,
  validateVmForm,
  VM_LIMITS,
  VM_NAME_MAX_CHARS,
  VM_NAME_PATTERN,
  VM_PROFILES,
} from '../../../../src/dashboard/model/vm-form.js';
import { checkVmName, LIMITS, PROFILES, VM_NAME_MAX, VM_NAME_RE } from '../../../../src/vms/create-request.js';

describe('dashboard VM form', () => {
  test("its rules are the server's (src/vms/create-request.ts)", () => {
    assert.deepEqual(VM_LIMITS, LIMITS);
    assert.deepEqual([...VM_PROFILES], [...PROFILES]);
    assert.equal(VM_NAME_MAX_CHARS, VM_NAME_MAX);
    assert.equal(VM_NAME_PATTERN.source, VM_NAME_RE.source);
  });

  test('the defaults are valid and become the body', () => {
    const f = { ...defaultVmForm(), name: 'agent-1' };
    assert.deepEqual(validateVmForm(f), {
      ok: true,
      body: { name: 'agent-1', profile: 'svc-dev', vcpus: 4, memory_mb: 8192, disk_gb: 50 },
    });
  });

  test('each field says what is wrong with it', () => {
    const r = validateVmForm({ name: 'Agent 1', profile: 'gpu', vcpus: '0', memory_mb: '1.5', disk_gb: '99999' });
    assert.equal(r.ok, false);
    if (r.ok) return;
    assert.equal(r.errors.name, 'Name must start with agent-');
    assert.match(r.errors.profile ?? '', /svc-dev, basic/);
    assert.match(r.errors.vcpus ?? '', /1 to 64/);
    assert.match(r.errors.memory_mb ?? '', /256 to 262144/);
    assert.match(r.errors.disk_gb ?? '', /1 to 2048/);
    assert.equal((validateVmForm({ ...defaultVmForm(), name: '' }) as { errors: { name: string } }).errors.name, 'Name is required');
    assert.match((validateVmForm({ ...defaultVmForm(), name: 'agent-UP' }) as { errors: { name: string } }).errors.name, /lower-case/);
    assert.match(
      (validateVmForm({ ...defaultVmForm(), name: `agent-${'x'.repeat(60)}` }) as { errors: { name: string } }).errors.name,
      /at most 63/,
    );
  });

  test('a name the form accepts, the server accepts (and the other way round)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 70 }), fc.stringMatching(/^agent-[a-z0-9-]{1,60}$/)), (name) => {
        // The form trims what was typed; compare on names that need no trimming.
        fc.pre(name === name.trim());
        const client = validateVmForm({ ...defaultVmForm(), name }).ok;
        let server = true;
        try {
          checkVmName(name);
        } catch {
          server = false;
        }
        assert.equal(client, server, name);
      }),
    );
  });

  test('a free name is suggested', () => {
    assert.equal(suggestVmName([]), 'agent-1');
    assert.equal(suggestVmName(['agent-1', 'agent-2', 'agent-4']), 'agent-3');
  });
});
