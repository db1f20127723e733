/**
 * A storage tree on disk for the storage tests, with traps: symlinks out of the root (file,
 * directory, absolute, dangling, to a sibling whose name shares the root's prefix), a loop, a
 * FIFO, and a canary file outside the root whose content must never appear in a response.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface StorageFixture {
  readonly base: string;
  /** The storage root (global, inbox, outbox below it). */
  readonly root: string;
  readonly outside: string;
  /** Content of the canary file outside the root. */
  readonly canary: string;
  readonly taskId: string;
  readonly png: Buffer;
  cleanup(): void;
}

export function makeStorageFixture(): StorageFixture {
  const base = mkdtempSync(join(tmpdir(), 'sbx-storage-'));
  const root = join(base, 'storage');
  const outside = join(base, 'outside');
  const canary = `CANARY-${randomBytes(8).toString('hex')}`;
  const taskId = `task-${randomUUID()}`;
  const g = join(root, 'global');
  for (const d of [outside, join(g, 'docs'), join(root, 'global2'), join(root, 'inbox', 'agent-1', 'sub'), join(root, 'outbox', taskId)])
    mkdirSync(d, { recursive: true });

  writeFileSync(join(outside, 'canary.txt'), canary);
  writeFileSync(join(root, 'global2', 'secret.txt'), canary);
  writeFileSync(join(root, 'canary-in-root-parent.txt'), canary);
  writeFileSync(join(g, 'readme.txt'), 'hello from global\n');
  writeFileSync(join(g, 'docs', 'guide.md'), '# Guide\n');
  writeFileSync(join(g, '%2e%2e%2fliteral.txt'), 'a file whose name looks encoded');
  writeFileSync(join(g, 'a"b;c.txt'), 'quoted name');
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    randomBytes(256),
    Buffer.from([0, 0xff, 0xfe]),
  ]);
  writeFileSync(join(g, 'image.png'), png);
  writeFileSync(join(g, 'big.bin'), Buffer.alloc(4096, 7));
  writeFileSync(join(g, 'empty.txt'), '');
  symlinkSync('docs/guide.md', join(g, 'link-in'));
  symlinkSync('docs', join(g, 'dirlink-in'));
  symlinkSync(join(outside, 'canary.txt'), join(g, 'link-out'));
  symlinkSync('../../outside/canary.txt', join(g, 'link-out-rel'));
  symlinkSync('/etc/passwd', join(g, 'link-abs'));
  symlinkSync(outside, join(g, 'dirlink-out'));
  symlinkSync(join(outside, 'nope.txt'), join(g, 'dangling-out'));
  symlinkSync('../global2/secret.txt', join(g, 'sibling'));
  symlinkSync('../canary-in-root-parent.txt', join(g, 'up-one'));
  symlinkSync('loop', join(g, 'loop'));
  symlinkSync('link-in', join(g, 'chain-in'));
  symlinkSync('link-out', join(g, 'chain-out'));
  execFileSync('mkfifo', [join(g, 'fifo')]);

  writeFileSync(join(root, 'inbox', 'agent-1', 'in.txt'), 'for agent-1');
  writeFileSync(join(root, 'inbox', 'agent-1', 'sub', 'data.json'), '{"ok":true}');
  symlinkSync(outside, join(root, 'inbox', 'evil'));
  writeFileSync(join(root, 'outbox', taskId, 'report.json'), '{"result":"done"}');
  writeFileSync(join(root, 'outbox', taskId, 'change.diff'), '--- a\n+++ b\n');

  return { base, root, outside, canary, taskId, png, cleanup: () => rmSync(base, { recursive: true, force: true }) };
}
