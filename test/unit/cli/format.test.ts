import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bytes, duration, relativeTime, renderFields, renderTable, sanitize } from '../../../src/cli/format.js';

describe('renderTable', () => {
  const rows = [
    { name: 'agent-a', state: 'running', cpus: 4 },
    { name: 'agent-long-name', state: 'stopped', cpus: 16 },
  ];
  const cols = [
    { header: 'NAME', value: (r: (typeof rows)[number]) => r.name },
    { header: 'STATE', value: (r: (typeof rows)[number]) => r.state, color: () => 'green' as const },
    { header: 'VCPUS', value: (r: (typeof rows)[number]) => String(r.cpus), right: true },
  ];

  test('aligns columns two spaces apart, numbers right, no trailing spaces', () => {
    assert.equal(
      renderTable(rows, cols),
      'NAME             STATE    VCPUS\n' + 'agent-a          running      4\n' + 'agent-long-name  stopped     16\n',
    );
  });

  test('colour does not change the alignment and is absent unless asked for', () => {
    const plain = renderTable(rows, cols);
    const colored = renderTable(rows, cols, { color: true });
    assert.notEqual(colored, plain);
    // eslint-disable-next-line no-control-regex
    assert.equal(colored.replace(/\u001b\[[0-9;]*m/g, ''), plain);
    assert.ok(!plain.includes('\u001b'));
  });

  test('an empty list prints the empty-state text', () => {
    assert.equal(renderTable([], cols, { empty: 'No VMs.' }), 'No VMs.\n');
  });

  test('server strings cannot smuggle control characters to the terminal', () => {
    assert.equal(sanitize('a\u001b[2Jb\tc'), 'a?[2Jb c');
    const fields = renderFields([['name', 'x\u001b]0;pwned\u0007']]);
    assert.ok(!fields.includes('\u001b') && !fields.includes('\u0007'));
  });
});

describe('times and sizes', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  test('relativeTime', () => {
    assert.equal(relativeTime('2026-01-01T11:59:55Z', now), '5s ago');
    assert.equal(relativeTime(now - 3 * 60_000, now), '3m ago');
    assert.equal(relativeTime(now - 2 * 3_600_000, now), '2h ago');
    assert.equal(relativeTime(now - 4 * 86_400_000, now), '4d ago');
    assert.equal(relativeTime(now + 90_000, now), 'in 1m');
    assert.equal(relativeTime(now, now), 'just now');
    assert.equal(relativeTime(null, now), '-');
    assert.equal(relativeTime('garbage', now), '-');
  });
  test('duration and bytes', () => {
    assert.equal(duration(45), '45s');
    assert.equal(duration(3725), '1h2m');
    assert.equal(duration(null), '-');
    assert.equal(bytes(512), '512 B');
    assert.equal(bytes(8 * 1024 ** 3), '8.0 GiB');
  });
});
