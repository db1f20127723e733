import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { createLogger, formatCompactLine, redactText } from '../../../src/observability/log.js';
import type { LogConfig } from '../../../src/observability/log.js';
import { SvcError } from '../../../src/core/errors.js';

const BASE: LogConfig = { format: 'json', level: 'info', file: null, rotation: 'none', retentionDays: 7 };

/** A destination that keeps everything written to it. */
function collector(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return { stream, text: () => chunks.join('') };
}

function logTo(cfg: Partial<LogConfig> = {}): ReturnType<typeof createLogger> & { text: () => string } {
  const c = collector();
  return { ...createLogger({ ...BASE, ...cfg }, { destination: c.stream }), text: c.text };
}

const PRIVATE_KEY_PEM = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const PRIVATE_KEY_BODY = PRIVATE_KEY_PEM.split('\n')[1]!;
const CERT_BODY = 'MIIBkTCB+wIJAKHBfpegPjMCMA0GCSqGSIb3DQEBCwUAMBExDzANBgNVBAMMBnVu';
const CERT_PEM = `-----BEGIN CERTIFICATE-----\n${CERT_BODY}\ndXNlZDAeFw0yNjAxMDEwMDAwMDBaFw0yNzAxMDEwMDAwMDBa\n-----END CERTIFICATE-----\n`;
const BEARER = 'tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudC0xIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ';
const SECRETS = [PRIVATE_KEY_BODY, CERT_BODY, BEARER, JWT, 'hunter2-password', 'deep-api-key-value'];

function assertNoSecret(out: string): void {
  for (const s of SECRETS) assert.ok(!out.includes(s), `output leaks ${s.slice(0, 12)}…:\n${out}`);
}

function logEverySecretShape(logger: ReturnType<typeof createLogger>['logger']): void {
  logger.info(`loaded key ${PRIVATE_KEY_PEM}`);
  logger.info({ note: CERT_PEM, list: [PRIVATE_KEY_PEM] }, 'certificate attached');
  logger.info({ headers: { authorization: `Bearer ${BEARER}` } }, 'request');
  logger.info('upstream said %s', `Authorization: Bearer ${BEARER}`);
  logger.info({ session: JWT }, 'session');
  logger.info({ a: { b: { c: { d: { password: 'hunter2-password' } } } }, items: [{ apiKey: 'deep-api-key-value' }] }, 'nested');
  logger.error(new Error(`tls failed for ${CERT_PEM}`), 'handshake');
  logger.error({ err: Object.assign(new Error('request failed'), { config: { headers: { Authorization: `Bearer ${BEARER}` } } }) });
  logger.child({ agent_id: 'a-1', token: BEARER }).warn('child with a token binding');
  logger.info({ truncated: PRIVATE_KEY_PEM.slice(0, 120) }, 'a cut-off key');
}

void describe('createLogger', () => {
  void test('json writes one pino object per line, with child bindings', async () => {
    const log = logTo();
    log.logger.child({ agent_id: 'agent-7' }).info({ port: 8122 }, 'listening');
    log.logger.debug('not at info');
    await log.flush();
    const lines = log.text().trim().split('\n');
    assert.equal(lines.length, 1);
    const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(rec.msg, 'listening');
    assert.equal(rec.level, 30);
    assert.equal(rec.agent_id, 'agent-7');
    assert.equal(rec.port, 8122);
    assert.equal(typeof rec.time, 'number');
  });

  void test('silent logs nothing, trace logs everything', async () => {
    const silent = logTo({ level: 'silent' });
    silent.logger.fatal('quiet');
    const trace = logTo({ level: 'trace' });
    trace.logger.trace('t');
    trace.logger.debug('d');
    await Promise.all([silent.flush(), trace.flush()]);
    assert.equal(silent.text(), '');
    assert.equal(trace.text().trim().split('\n').length, 2);
  });

  void test('compact writes one short line per record', async () => {
    const log = logTo({ format: 'compact' });
    log.logger.child({ component: 'http' }).info({ port: 8122, host: '127.0.0.1', why: 'two words' }, 'listening');
    log.logger.warn({ err: new Error('disk full') }, 'multi\nline');
    await log.flush();
    const [first, second, extra] = log.text().split('\n');
    assert.match(first!, /^\d{2}:\d{2}:\d{2}\.\d{3} INFO {2}http listening port=8122 host=127\.0\.0\.1 why="two words"$/);
    assert.match(second!, /^\d{2}:\d{2}:\d{2}\.\d{3} WARN {2}multi\\nline err="Error: disk full"$/);
    assert.equal(extra, '');
  });

  void test('compact passes a line it cannot parse through unchanged', () => {
    assert.equal(formatCompactLine('not json'), 'not json\n');
  });

  void test('pretty is readable and has no colour codes when the output is not a terminal', async () => {
    const log = logTo({ format: 'pretty' });
    log.logger.info({ vm: 'agent-1' }, 'started');
    await log.flush();
    const out = log.text();
    assert.match(out, /INFO.*started/);
    assert.match(out, /vm: "agent-1"/);
    assert.ok(!out.includes('\u001b['), 'no ANSI escapes');
  });

  for (const format of ['json', 'pretty', 'compact'] as const) {
    void test(`${format}: no private key, certificate, bearer token, JWT or secret-named field reaches the output`, async () => {
      const log = logTo({ format });
      logEverySecretShape(log.logger);
      await log.flush();
      const out = log.text();
      assertNoSecret(out);
      assert.match(out, /REDACTED/);
      assert.match(out, /handshake/, 'the records themselves are still logged');
    });
  }

  void test('json stays valid JSON after redaction', async () => {
    const log = logTo();
    logEverySecretShape(log.logger);
    await log.flush();
    for (const line of log.text().trim().split('\n')) JSON.parse(line);
  });

  void test("the caller's objects are not modified by redaction", () => {
    const log = logTo();
    const obj = { nested: { password: 'hunter2-password' } };
    log.logger.info(obj, 'x');
    assert.equal(obj.nested.password, 'hunter2-password');
  });

  void test('a cyclic or absurdly deep object is logged, cut off instead of walked forever', async () => {
    const log = logTo();
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    let deep: Record<string, unknown> = { password: 'hunter2-password' };
    for (let i = 0; i < 40; i++) deep = { next: deep };
    log.logger.info({ cyclic, deep }, 'odd shapes');
    await log.flush();
    assertNoSecret(log.text());
    assert.match(log.text(), /nested deeper than/);
  });

  void test('property: a secret-named key anywhere in a logged object never shows its value', () => {
    const secretKey = fc.constantFrom(
      'password',
      'db_password',
      'token',
      'agentToken',
      'secret',
      'apiKey',
      'x-api-key',
      'private_key',
      'key_pem',
      'authorization',
      'Cookie',
    );
    const plainKey = fc.constantFrom('a', 'b', 'items', 'meta', 'vm', 'cfg');
    fc.assert(
      fc.property(
        fc.array(fc.oneof(plainKey, fc.nat(3)), { maxLength: 7 }),
        secretKey,
        fc.stringMatching(/^[a-z0-9]{12,24}$/),
        (path, key, value) => {
          let leaf: Record<string, unknown> = { [key]: `S3CR3T${value}` };
          for (const step of [...path].reverse())
            leaf = typeof step === 'number' ? { list: Array.from({ length: step + 1 }, () => leaf) } : { [step]: leaf };
          const log = logTo();
          log.logger.info(leaf, 'p');
          assert.ok(!log.text().includes(`S3CR3T${value}`), log.text());
        },
      ),
      { numRuns: 300 },
    );
  });

  void test('LOG_FILE receives the lines (directories created)', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'log-test-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'nested', 'deeper', 'sandboxd.log');
    const log = createLogger({ ...BASE, file });
    log.logger.info({ n: 1 }, 'to the file');
    await log.flush();
    const rec = JSON.parse(readFileSync(file, 'utf8').trim()) as Record<string, unknown>;
    assert.equal(rec.msg, 'to the file');
  });

  void test('daily rotation writes <name>.<date>.1.<ext> next to LOG_FILE', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'log-roll-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const log = createLogger({ ...BASE, format: 'compact', file: join(dir, 'logs', 'sandboxd.log'), rotation: 'daily', retentionDays: 3 });
    log.logger.info('logged before the file was open');
    await log.flush();
    const names = readdirSync(join(dir, 'logs'));
    assert.equal(names.length, 1);
    assert.match(names[0]!, /^sandboxd\.\d{4}-\d{2}-\d{2}\.1\.log$/);
    assert.match(readFileSync(join(dir, 'logs', names[0]!), 'utf8'), /INFO {2}logged before the file was open/);
  });

  void test('a LOG_FILE that cannot be created fails at startup, naming the path', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'log-bad-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'plain-file'), '');
    assert.throws(() => createLogger({ ...BASE, file: join(dir, 'plain-file', 'x.log') }), /cannot open LOG_FILE .*plain-file/);
  });

  void test('flush is bounded: a destination that never drains makes it reject with server.timeout', async (t) => {
    const stuck = new Writable({ highWaterMark: 1, write: () => undefined });
    const log = createLogger(BASE, { destination: stuck });
    log.logger.info('never written');
    // the deadline timer is unref'd (it must not hold a shutting-down process open); hold this one open
    const keepAlive = setTimeout(() => undefined, 10_000);
    t.after(() => clearTimeout(keepAlive));
    await assert.rejects(log.flush(200), (err: unknown) => err instanceof SvcError && err.code === 'server.timeout');
  });
});

void describe('redactText', () => {
  void test('leaves ordinary text alone', () => {
    const text = 'Bearer of bad news: -----BEGIN nothing; eyJ is short';
    assert.equal(redactText(text), text);
  });

  void test('names what it removed', () => {
    assert.equal(redactText(`k=${PRIVATE_KEY_PEM.trim()} done`), 'k=[REDACTED PRIVATE KEY] done');
    assert.equal(redactText(`Authorization: Bearer ${BEARER}`), 'Authorization: Bearer [REDACTED]');
    assert.equal(redactText(`jwt ${JWT}`), 'jwt [REDACTED JWT]');
    assert.equal(redactText('db postgres://svc:s3cr3t-pw@db.internal:5432/x'), 'db postgres://[REDACTED]@db.internal:5432/x');
  });
});
