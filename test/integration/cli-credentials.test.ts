/**
 * `sbx cred add|list|lease|revoke|audit` against a server with the credentials component: the
 * README's worked example, end to end, with the echo upstream.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runSbx, type CliServer } from './cli-harness.js';
import { EchoUpstream, startHarness, type Harness } from './credentials-harness.js';

const TOKEN = 'tok-0123456789abcdef-cli';

void describe('sbx cred', () => {
  let h: Harness;
  let srv: CliServer;
  const up = new EchoUpstream();

  before(async () => {
    await up.start();
    h = await startHarness();
    const home = await mkdtemp(join(tmpdir(), 'sbx-home-'));
    srv = { server: h.server, baseUrl: h.base, home, stop: () => rm(home, { recursive: true, force: true }) };
  });
  after(async () => {
    await srv.stop();
    await h.stop();
    await up.stop();
  });

  void test('add (value from stdin), list, lease, a proxied call, audit, revoke', async () => {
    const add = await runSbx(srv, ['cred', 'add', 'echo-token'], { stdin: `${TOKEN}\n` });
    assert.equal(add.code, 0, add.stderr);
    assert.match(add.stdout, /credential echo-token registered \(injected as authorization: Bearer <value>\)/);
    const empty = await runSbx(srv, ['cred', 'add', 'other'], { stdin: '' });
    assert.equal(empty.code, 2);

    const ls = await runSbx(srv, ['cred', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^echo-token\s+authorization\s+"Bearer "\s+0\s/m);

    const lease = await runSbx(srv, [
      'cred',
      'lease',
      'echo-token',
      '--agent',
      'agent-1',
      '--instance',
      'inst-1',
      '--ttl',
      '600',
      '--host',
      `127.0.0.1:${up.port}`,
      '--path',
      '/v1',
      '--method',
      'GET',
      '--json',
    ]);
    assert.equal(lease.code, 0, lease.stderr);
    const id = (JSON.parse(lease.stdout) as { id: string }).id;
    assert.match(id, /^credlease_[0-9a-f]{32}$/);

    const res = await h.call('POST', '/api/v2/credential-proxy/http', {
      lease_id: id,
      agent_id: 'agent-1',
      instance_id: 'inst-1',
      session_id: null,
      method: 'GET',
      url: `http://127.0.0.1:${up.port}/v1/hello`,
      headers: {},
      body: null,
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(up.seen.at(-1)?.headers.authorization, `Bearer ${TOKEN}`);
    assert.match(res.json['body'] as string, /"authorization":"Bearer \[REDACTED\]"/);

    const leases = await runSbx(srv, ['cred', 'ls', '--leases', '--state', 'active']);
    assert.match(leases.stdout, new RegExp(`^${id}\\s+echo-token\\s+active\\s+agent-1\\s+inst-1`, 'm'));

    const audit = await runSbx(srv, ['cred', 'audit']);
    assert.equal(audit.code, 0, audit.stderr);
    assert.match(audit.stdout, /proxy\.http\s+allowed/);
    assert.match(audit.stdout, /lease\.grant\s+allowed/);

    const revoke = await runSbx(srv, ['cred', 'revoke', id]);
    assert.equal(revoke.code, 0, revoke.stderr);
    assert.match(revoke.stdout, /^state:\s+revoked$/m);
    const bad = await runSbx(srv, ['cred', 'audit', '--date', '2026-02-30']);
    assert.equal(bad.code, 2, 'a date the server rejects (400) is a usage error');
    assert.match(bad.stderr, /request\.invalid/);
    for (const out of [add, ls, lease, leases, audit, revoke]) assert.ok(!out.stdout.includes(TOKEN) && !out.stderr.includes(TOKEN));
  });
});
