/**
 * Waiting for bootstrap material (--bootstrap-wait): the flag's rules, what counts as material in a
 * padded fw_cfg file, and the wait itself over a real file that gets the material later (as a
 * restored checkpoint's fw_cfg file does). The qemu path end to end: realvm-checkpoint.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { materialText, waitForBootstrapMaterial } from '../../../src/guest-agent/bootstrap-wait.js';
import { AgentConfigError, parseAgentConfig } from '../../../src/guest-agent/config.js';
import { BOOTSTRAP_FW_CFG_BYTES, bootstrapFwCfgText } from '../../../src/vms/fw-cfg.js';
import { BOOTSTRAP_MATERIAL_SCHEMA } from '../../../src/wire/bootstrap.js';

const MATERIAL = JSON.stringify({
  schema_version: BOOTSTRAP_MATERIAL_SCHEMA,
  token: 'A'.repeat(43),
  token_id: 't-1',
  consume_url: 'http://192.168.213.1:8122/api/v1/bootstrap-enrollment/consume',
  ca_pem: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n',
  trust_domain: 'sandbox.local',
  instance_id: 'i-fresh',
  agent_id: 'agent-a',
  expires_at: '2030-01-01T00:00:00.000Z',
});

void describe('--bootstrap-wait', () => {
  test('needs --bootstrap-token-file, and then the ids may come from the material', () => {
    const base = ['--server', '10.0.0.1:8120', '--certs', '/run/sbx/certs'];
    assert.throws(() => parseAgentConfig([...base, '--bootstrap-wait', '/fw/raw'], {}, '/'), AgentConfigError);
    const cfg = parseAgentConfig([...base, '--bootstrap-wait', '/fw/raw', '--bootstrap-token-file', '/run/sbx/b.json'], {}, '/');
    assert.equal(cfg.bootstrapWait, '/fw/raw');
    assert.equal(cfg.bootstrapTokenFile, '/run/sbx/b.json');
    assert.equal(cfg.instanceId, '');
  });

  test('the fw_cfg file is always the same size; only real material counts', () => {
    const placeholder = bootstrapFwCfgText(null);
    const filled = bootstrapFwCfgText(MATERIAL);
    assert.equal(Buffer.byteLength(placeholder), BOOTSTRAP_FW_CFG_BYTES);
    assert.equal(Buffer.byteLength(filled), BOOTSTRAP_FW_CFG_BYTES);
    assert.equal(materialText(placeholder), null);
    assert.equal(materialText(filled), MATERIAL);
    assert.equal(materialText(''), null);
    assert.equal(materialText('{"schema_version":"other","token":"x"}'), null);
    assert.equal(materialText(MATERIAL.slice(0, 100)), null, 'a half-written file is not material');
    assert.throws(() => bootstrapFwCfgText('x'.repeat(BOOTSTRAP_FW_CFG_BYTES)), /does not fit/);
  });

  test('waits through the placeholder, then copies the material 0600 to the token file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-bwait-'));
    try {
      const fw = join(dir, 'raw');
      const token = join(dir, 'run', 'bootstrap.json');
      await writeFile(fw, bootstrapFwCfgText(null));
      let arrivedAfterWrite = false;
      const waiting = waitForBootstrapMaterial({
        waitFile: fw,
        tokenFile: token,
        log: pino({ level: 'silent' }),
        pollMs: 10,
        syncClock: false,
      }).then((ok) => {
        arrivedAfterWrite = ok;
        return ok;
      });
      await new Promise((r) => setTimeout(r, 60));
      await assert.rejects(stat(token), 'nothing is copied while the file holds the placeholder');
      await writeFile(fw, bootstrapFwCfgText(MATERIAL));
      assert.equal(await waiting, true);
      assert.ok(arrivedAfterWrite);
      assert.equal((await readFile(token, 'utf8')).trim(), MATERIAL);
      assert.equal((await stat(token)).mode & 0o777, 0o600);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a stop signal ends the wait without material', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-bwait-'));
    try {
      const stop = new AbortController();
      const waiting = waitForBootstrapMaterial({
        waitFile: join(dir, 'missing'),
        tokenFile: join(dir, 'b.json'),
        log: pino({ level: 'silent' }),
        signal: stop.signal,
        pollMs: 10,
        syncClock: false,
      });
      stop.abort();
      assert.equal(await waiting, false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
