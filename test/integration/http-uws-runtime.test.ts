/**
 * Which uWS implementation is loaded is detected, and the package's JS fallback (a partial stub
 * that cannot serve our requests) makes the listeners refuse to start with a clear error.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';

const serverModule = new URL('../../src/http/uws-server.js', import.meta.url).href;
const wsModule = new URL('../../src/http/ws-server.js', import.meta.url).href;

const script = `
import { startHttpListener, uwsRuntimeInfo } from ${JSON.stringify(serverModule)};
import { startWsListener } from ${JSON.stringify(wsModule)};
const out = { runtime: uwsRuntimeInfo() };
for (const [name, start] of [['http', startHttpListener], ['ws', startWsListener]]) {
  try {
    const l = await start({ host: '127.0.0.1', port: 0, router: undefined, logger: { info() {} } });
    out[name] = 'started';
    await l.close();
  } catch (err) {
    out[name] = String(err.message);
  }
}
console.log('RESULT ' + JSON.stringify(out));
`;

async function run(env: NodeJS.ProcessEnv): Promise<{ runtime: { native: boolean; detail: string }; http: string; ws: string }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { env, timeout: 60_000 });
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT ')) ?? assert.fail(`no result in:\n${stdout}`);
  return JSON.parse(line.slice('RESULT '.length)) as { runtime: { native: boolean; detail: string }; http: string; ws: string };
}

void test('on the JS fallback both listeners refuse to start, naming the cause', async () => {
  const out = await run({ ...process.env, UWS_USE_FALLBACK: '1' });
  assert.equal(out.runtime.native, false);
  assert.match(out.runtime.detail, /fallback/);
  assert.match(out.http, /native binary not loaded/);
  assert.match(out.ws, /native binary not loaded/);
});

void test('the native binary is detected on Node 20', async () => {
  const env = { ...process.env };
  delete env.UWS_USE_FALLBACK;
  const out = await run(env);
  assert.equal(out.runtime.native, true, out.runtime.detail);
});
