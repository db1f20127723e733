/**
 * `sandboxd certs issue-agent | issue-operator`: files written, CA created on demand, exit codes,
 * usage errors, and that no key material reaches the terminal.
 */
import assert from 'node:assert/strict';
import { chmod, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCertsCommand } from '../../../src/identity/certs-command.js';
import { modeOf, openssl, tempDir } from './helpers.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function certs(argv: string[], secretsDir: string, trustDomain = 'sandbox.local'): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCertsCommand(
    argv,
    { secretsDir, trustDomain },
    {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
    },
  );
  return { code, stdout, stderr };
}

function assertNoKeyMaterial(run: Run, keyPem: string): void {
  const body = keyPem.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
  for (const text of [run.stdout, run.stderr]) {
    assert.ok(!text.includes('PRIVATE KEY'), 'output mentions a PEM private key block');
    for (const line of body) assert.ok(!text.includes(line), 'output contains key material');
  }
}

void describe('sandboxd certs', () => {
  void test('issue-agent creates the CA when missing and writes ca.pem, agent.pem, agent-key.pem', async (t) => {
    const secrets = join(await tempDir(t), 'secrets');
    const out = join(await tempDir(t), 'agent-certs');
    const run = await certs(['issue-agent', '--instance-id', 'i-0042', '--out', out], secrets);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /spiffe:\/\/sandbox\.local\/agent\/i-0042/);
    assert.deepEqual((await readdir(secrets)).sort(), ['ca-key.pem', 'ca.pem', 'server-key.pem', 'server.pem']);
    assert.deepEqual((await readdir(out)).sort(), ['agent-key.pem', 'agent.pem', 'ca.pem']);
    assert.equal(await modeOf(join(out, 'agent-key.pem')), '0600');
    assert.equal(await readFile(join(out, 'ca.pem'), 'utf8'), await readFile(join(secrets, 'ca.pem'), 'utf8'));
    const verify = await openssl(['verify', '-CAfile', join(secrets, 'ca.pem'), join(out, 'agent.pem')]);
    assert.equal(verify.code, 0, verify.out);
    assertNoKeyMaterial(run, await readFile(join(out, 'agent-key.pem'), 'utf8'));
    assertNoKeyMaterial(run, await readFile(join(secrets, 'ca-key.pem'), 'utf8'));

    // A second agent from the same CA: the CA is reused, not recreated.
    const caBefore = await readFile(join(secrets, 'ca.pem'), 'utf8');
    const again = await certs(['issue-agent', '--instance-id', 'i-0043', '--out', join(out, 'second')], secrets);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(await readFile(join(secrets, 'ca.pem'), 'utf8'), caBefore);
  });

  void test('issue-operator writes ca.pem, operator.pem, operator-key.pem with the trust domain given', async (t) => {
    const secrets = await tempDir(t);
    const out = await tempDir(t);
    const run = await certs(['issue-operator', '--name', 'alice', '--out', out, '--ttl-seconds', '3600'], secrets, 'corp.example');
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual((await readdir(out)).sort(), ['ca.pem', 'operator-key.pem', 'operator.pem']);
    const text = await openssl(['x509', '-in', join(out, 'operator.pem'), '-noout', '-ext', 'subjectAltName', '-enddate']);
    assert.match(text.out, /URI:spiffe:\/\/corp\.example\/operator\/alice/);
    assertNoKeyMaterial(run, await readFile(join(out, 'operator-key.pem'), 'utf8'));
  });

  void test('help is exit 0 on stdout; no command is exit 2', async (t) => {
    const secrets = await tempDir(t);
    const help = await certs(['--help'], secrets);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /issue-agent --instance-id ID --out DIR/);
    assert.match(help.stdout, /issue-operator --name NAME --out DIR/);
    const subHelp = await certs(['issue-agent', '--help'], secrets);
    assert.equal(subHelp.code, 0);
    const none = await certs([], secrets);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /usage: sandboxd certs/);
    assert.deepEqual(await readdir(secrets), [], 'help creates nothing');
  });

  void test('usage errors are exit 2 with a message and write nothing', async (t) => {
    const secrets = await tempDir(t);
    const out = join(await tempDir(t), 'out');
    const cases: [string[], RegExp][] = [
      [['rotate'], /unknown command "rotate"/],
      [['issue-agent', '--out', out], /--instance-id ID is required/],
      [['issue-agent', '--instance-id', 'i-1'], /--out DIR is required/],
      [['issue-agent', '--instance-id', '../etc', '--out', out], /invalid instance id/],
      [['issue-agent', '--instance-id', 'i-1', '--out', out, '--bogus'], /bogus/],
      [['issue-agent', '--instance-id', 'i-1', '--out', out, '--ttl-seconds', '0'], /--ttl-seconds/],
      [['issue-agent', '--name', 'x', '--instance-id', 'i-1', '--out', out], /--instance-id, not --name/],
      [['issue-operator', '--out', out], /--name NAME is required/],
      [['issue-operator', '--name', 'a/b', '--out', out], /invalid operator name/],
    ];
    for (const [argv, message] of cases) {
      const run = await certs(argv, secrets);
      assert.equal(run.code, 2, `${argv.join(' ')} → ${run.code}`);
      assert.match(run.stderr, message);
    }
    await assert.rejects(readdir(out), /ENOENT/);
    assert.deepEqual(await readdir(secrets), [], 'no CA is created for a rejected request');
  });

  void test('a CA key readable by others is a failure (exit 1) that says how to fix it', async (t) => {
    const secrets = await tempDir(t);
    assert.equal((await certs(['issue-agent', '--instance-id', 'i-1', '--out', await tempDir(t)], secrets)).code, 0);
    await chmod(join(secrets, 'ca-key.pem'), 0o644);
    const run = await certs(['issue-agent', '--instance-id', 'i-2', '--out', await tempDir(t)], secrets);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /chmod 600/);
  });
});
