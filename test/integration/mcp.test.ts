/**
 * The MCP server as a coding assistant uses it (issue 20 item 6, README "MCP"): the whole server
 * on loopback (libvirt's test:///default, local agents, real TLS), the official SDK's Client with
 * its StreamableHTTPClientTransport presenting an operator certificate through undici. It lists
 * the tools, creates a VM and waits for it, lists agents and VMs, runs a command on the new VM's
 * agent with its output streamed as progress, reads a task's log page by page; a viewer is refused
 * the mutating tools; bad input is a tool error; the plaintext listener refuses the endpoint; and
 * discovery is exactly what the client lists.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import type { Config } from '../../src/config/schema.js';
import type { FleetWorkloadsResponse } from '../../src/wire/fleet.js';
import { inject } from '../../src/http/inject.js';
import { ensureCa, issueOperatorCert, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { initGitRepo } from '../support/git-repo.js';
import { mtlsRequest } from '../support/mtls-request.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

type Json = Record<string, unknown>;

const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
/** Shell that waits (bounded) for a file the test writes once it saw the command's output as progress. */
const untilExists = (file: string): string => `i=0; while [ ! -e '${file}' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`;

const TOOL_NAMES = ['list_agents', 'list_vms', 'create_vm', 'run_command', 'read_task_log'];

describe('MCP server (admin listener, operator mTLS)', () => {
  let dir: string;
  let config: Config;
  let server: ServerHandle;
  let ca: CaMaterial;
  const certs: Record<string, IssuedCert> = {};
  const clients: { client: Client; dispatcher: Agent }[] = [];
  const vm = `agent-mcp-${Math.random().toString(36).slice(2, 7)}`;

  async function connect(who: string): Promise<Client> {
    const cert = certs[who] as IssuedCert;
    const dispatcher = new Agent({ connect: { ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem } });
    const transport = new StreamableHTTPClientTransport(new URL(`https://127.0.0.1:${server.ports.admin}/api/v2/admin/mcp`), {
      fetch: (url, init) => undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher }),
    });
    const client = new Client({ name: `mcp-test-${who}`, version: '1.0.0' });
    await client.connect(transport);
    clients.push({ client, dispatcher });
    return client;
  }

  const call = async (client: Client, name: string, args: Json, opts: Parameters<Client['callTool']>[2] = {}): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args }, undefined, opts)) as CallToolResult;
  const textOf = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  const ok = (r: CallToolResult): Json => {
    assert.notEqual(r.isError, true, textOf(r));
    return r.structuredContent as Json;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-mcp-'));
    const rolesPath = join(dir, 'roles.json');
    await writeFile(rolesPath, JSON.stringify({ alice: 'admin', vera: 'viewer' }));
    config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath, SVC_ACTOR_SHARDS: '1', SVC_SHUTDOWN_DEADLINE_MS: '8000' });
    server = await startServer(config, pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }));
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    certs['alice'] = await issueOperatorCert(ca, { name: 'alice' });
    certs['vera'] = await issueOperatorCert(ca, { name: 'vera' });
  });

  after(async () => {
    for (const c of clients) {
      await c.client.close().catch(() => undefined);
      await c.dispatcher.close().catch(() => undefined);
    }
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  test('an SDK client lists the tools, each with a schema and the permission it needs', async () => {
    const alice = await connect('alice');
    assert.equal(alice.getServerVersion()?.name, 'sandboxd');
    const { tools } = await alice.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      TOOL_NAMES,
    );
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(typeof t.description, 'string');
      assert.match(String(t._meta?.['sandboxd/permission']), /^admin\.(read|hypervisor)$/);
    }
    const run = tools.find((t) => t.name === 'run_command');
    assert.deepEqual(run?.inputSchema.required?.slice().sort(), ['agent_id', 'command']);
    const { resources } = await alice.listResources();
    assert.deepEqual(
      resources.map((r) => r.uri),
      ['sandboxd://fleet/agents', 'sandboxd://fleet/vms'],
    );
  });

  test('create_vm creates a VM and waits for it; list_vms and list_agents show it and its agent', async () => {
    const alice = await connect('alice');
    const created = ok(await call(alice, 'create_vm', { name: vm, vcpus: 1, memory_mb: 512, disk_gb: 1, wait_seconds: 120 }));
    const op = created['operation'] as Json;
    assert.match(String(op['id']), /^op-/);
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    assert.equal(created['agent_id'], vm);
    // The fleet inventory records it as desired, with who asked, as it does for POST /api/v1/vms.
    const fleet = (
      await inject(server.router, { method: 'GET', url: '/api/v2/fleet/workloads', headers: {} })
    ).json() as FleetWorkloadsResponse;
    const w = fleet.workloads.find((x) => x.name === vm);
    assert.equal(w?.desired?.state, 'running', JSON.stringify(w));
    assert.deepEqual(w.desired.owner, { actor: 'alice', mode: 'mtls' });
    assert.deepEqual([w.lineage?.origin, w.lineage?.operation_id], ['vm_create', op['id']]);
    const vms = ok(await call(alice, 'list_vms', { prefix: vm }));
    assert.deepEqual(
      (vms['vms'] as Json[]).map((v) => [v['name'], v['state']]),
      [[vm, 'running']],
    );
    const agent = await waitFor(
      `agent ${vm} Ready in list_agents`,
      async () => {
        const r = ok(await call(alice, 'list_agents', { status: 'Ready' }));
        return (r['agents'] as Json[]).find((a) => a['id'] === vm);
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 200 },
    );
    assert.equal(agent['status'], 'Ready');
    const read = await alice.readResource({ uri: 'sandboxd://fleet/agents' });
    const first = read.contents[0] as { text: string };
    assert.ok((JSON.parse(first.text) as { agents: Json[] }).agents.some((a) => a['id'] === vm));
  });

  test('run_command streams the output as progress and returns stdout, stderr and the exit code', async () => {
    const alice = await connect('alice');
    const progress: string[] = [];
    const flag = join(dir, 'progress-seen');
    const r = await call(
      alice,
      'run_command',
      // The command waits until the test saw its output as progress: streamed while it runs.
      { agent_id: vm, command: 'sh', args: ['-c', `echo hello-from-mcp; echo oops >&2; ${untilExists(flag)}; exit 3`] },
      {
        onprogress: (p) => {
          progress.push(p.message ?? '');
          if (progress.join('').includes('hello-from-mcp\n') && progress.join('').includes('[stderr] oops\n')) writeFileSync(flag, '');
        },
      },
    );
    const res = ok(r);
    assert.equal(res['exit_code'], 3);
    assert.deepEqual(res['stdout'], { text: 'hello-from-mcp\n', total_bytes: 15, omitted_bytes: 0 });
    assert.deepEqual(res['stderr'], { text: 'oops\n', total_bytes: 5, omitted_bytes: 0 });
    assert.match(String(res['command_id']), /^mcp-/);
    assert.match(textOf(r), /^exit code 3\n--- stdout \(15 bytes\) ---\nhello-from-mcp\n/);
    assert.ok(progress.join('').includes('hello-from-mcp\n'), JSON.stringify(progress));
    assert.ok(progress.join('').includes('[stderr] oops\n'), JSON.stringify(progress));
  });

  test('run_command keeps the head and tail of a large output within max_output_bytes and says what it left out', async () => {
    const alice = await connect('alice');
    const script = 'printf BEGIN; head -c 300000 /dev/zero | tr "\\0" x; printf END';
    const res = ok(await call(alice, 'run_command', { agent_id: vm, command: 'sh', args: ['-c', script], max_output_bytes: 4096 }));
    assert.equal(res['exit_code'], 0);
    const out = res['stdout'] as { text: string; total_bytes: number; omitted_bytes: number };
    assert.equal(out.total_bytes, 300_008);
    assert.equal(out.omitted_bytes, 300_008 - 4096);
    assert.ok(out.text.startsWith('BEGINxxx'));
    assert.ok(out.text.endsWith('xxxEND'));
    assert.match(out.text, /\[… 295912 bytes omitted …\]/);
  });

  test('cancelling a run_command call kills the command (its process group)', async () => {
    const alice = await connect('alice');
    // A unique argv, to find the process on this host (local agents run here).
    const marker = `3${Math.floor(Math.random() * 1e6)}.5`;
    const abort = new AbortController();
    const running = (): boolean =>
      execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
        .split('\n')
        .some((l) => l.trim() === `sleep ${marker}`);
    const calling = call(
      alice,
      'run_command',
      { agent_id: vm, command: 'sh', args: ['-c', `sleep ${marker}; echo not-killed`] },
      { signal: abort.signal },
    );
    await waitFor(`sleep ${marker} running`, () => running(), { deadlineMs: DEADLINE_MS.process, intervalMs: 50 });
    abort.abort();
    await assert.rejects(calling, /abort/i);
    await waitFor(`sleep ${marker} killed`, () => !running(), { deadlineMs: DEADLINE_MS.process, intervalMs: 100 });
  });

  test('a client that goes away mid-call has its command killed', async () => {
    const alice = await connect('alice');
    const marker = `4${Math.floor(Math.random() * 1e6)}.5`;
    const running = (): boolean =>
      execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
        .split('\n')
        .some((l) => l.trim() === `sleep ${marker}`);
    const calling = call(alice, 'run_command', { agent_id: vm, command: 'sh', args: ['-c', `sleep ${marker}`] });
    calling.catch(() => undefined);
    await waitFor(`sleep ${marker} running`, () => running(), { deadlineMs: DEADLINE_MS.process, intervalMs: 50 });
    await alice.close();
    await waitFor(`sleep ${marker} killed`, () => !running(), { deadlineMs: DEADLINE_MS.process, intervalMs: 100 });
  });

  test('a coding assistant runs sbx mcp over stdio: it relays to the admin listener with the operator certificate', async () => {
    const cert = certs['alice'] as IssuedCert;
    const certDir = join(dir, 'alice-certs');
    await mkdir(certDir, { recursive: true });
    await writeFile(join(certDir, 'ca.pem'), ca.caCertPem);
    await writeFile(join(certDir, 'operator.pem'), cert.certPem);
    await writeFile(join(certDir, 'operator-key.pem'), cert.keyPem, { mode: 0o600 });
    const stdio = new StdioClientTransport({
      command: process.execPath,
      args: [SBX_BIN, 'mcp'],
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        HOME: dir,
        XDG_CONFIG_HOME: dir,
        SBX_SERVER: `https://127.0.0.1:${server.ports.admin}`,
        SBX_OPERATOR_CERTS: certDir,
      },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'assistant', version: '1.0.0' });
    await client.connect(stdio);
    try {
      assert.deepEqual(
        (await client.listTools()).tools.map((t) => t.name),
        TOOL_NAMES,
      );
      const progress: string[] = [];
      const flag = join(dir, 'stdio-progress-seen');
      const r = await call(
        client,
        'run_command',
        { agent_id: vm, command: 'sh', args: ['-c', `echo via-stdio; ${untilExists(flag)}`] },
        {
          onprogress: (p) => {
            progress.push(p.message ?? '');
            if (progress.join('').includes('via-stdio')) writeFileSync(flag, '');
          },
        },
      );
      const res = ok(r);
      assert.equal(res['exit_code'], 0);
      assert.equal((res['stdout'] as { text: string }).text, 'via-stdio\n');
      assert.ok(progress.join('').includes('via-stdio'), JSON.stringify(progress));
    } finally {
      await client.close();
    }
  });

  test('bad input is a tool error, never a crash: schema failures, unknown fields, unknown agents and tasks', async () => {
    const alice = await connect('alice');
    const missing = await call(alice, 'run_command', { command: 'true' });
    assert.equal(missing.isError, true);
    assert.match(textOf(missing), /Input validation error.*agent_id/s);
    const typo = await call(alice, 'list_vms', { prefx: 'agent-' });
    assert.equal(typo.isError, true);
    assert.match(textOf(typo), /prefx/);
    const badName = await call(alice, 'create_vm', { name: 'Not A Name' });
    assert.equal(badName.isError, true);
    const noAgent = await call(alice, 'run_command', { agent_id: 'agent-nobody', command: 'true' });
    assert.equal(noAgent.isError, true);
    assert.match(textOf(noAgent), /^agent\.not_found: /);
    assert.deepEqual((noAgent.structuredContent as Json)['error'], { code: 'agent.not_found', message: 'no agent "agent-nobody"' });
    const noTask = await call(alice, 'read_task_log', { task_id: 'task-00000000-0000-4000-8000-000000000000' });
    assert.equal(noTask.isError, true);
    assert.match(textOf(noTask), /^task\.not_found: /);
    // The server still answers.
    ok(await call(alice, 'list_agents', {}));
  });

  test('read_task_log pages through a finished task log until end_of_log', async () => {
    const repo = join(dir, 'repo');
    await initGitRepo(repo);
    const manifest = [
      'name: mcp-log',
      'repository:',
      `  url: ${repo}`,
      'prompt: world',
      'agent:',
      `  command: [sh, -c, ${JSON.stringify('for i in 1 2 3 4 5; do echo line-$i; done')}]`,
      'lifecycle:',
      '  timeout: 5m',
      '',
    ].join('\n');
    const base = `http://127.0.0.1:${server.ports.http}`;
    const submitted = await fetch(`${base}/api/v1/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ manifest_yaml: manifest }),
    });
    assert.equal(submitted.status, 202, await submitted.clone().text());
    const taskId = ((await submitted.json()) as { task_id: string }).task_id;
    await waitFor(
      `task ${taskId} finished`,
      async () => {
        const t = (await (await fetch(`${base}/api/v1/tasks/${taskId}`)).json()) as { state: string };
        return ['completed', 'failed'].includes(t.state) ? t : undefined;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 200 },
    );
    const alice = await connect('alice');
    const records: Json[] = [];
    let after = 0;
    let pages = 0;
    for (;;) {
      const page = ok(await call(alice, 'read_task_log', { task_id: taskId, after_seq: after, max_records: 2 }));
      pages++;
      const recs = page['records'] as Json[];
      assert.ok(recs.length <= 2);
      records.push(...recs);
      after = page['next_after_seq'] as number;
      if (page['end_of_log'] === true) {
        assert.equal(page['state'], 'completed');
        break;
      }
      assert.ok(pages < 100, 'the log never ended');
    }
    assert.deepEqual(
      records.map((r) => r['seq']),
      records.map((_, i) => i + 1),
    );
    const stdout = records
      .filter((r) => r['event'] === 'stdout')
      .map((r) => r['data'])
      .join('');
    assert.match(stdout, /line-1\n?line-2\n?line-3\n?line-4\n?line-5/);
    assert.equal(records.at(-1)?.['event'], 'completed');
  });

  test('a viewer lists and reads but is refused create_vm and run_command', async () => {
    const vera = await connect('vera');
    ok(await call(vera, 'list_agents', {}));
    ok(await call(vera, 'list_vms', {}));
    const create = await call(vera, 'create_vm', { name: 'agent-mcp-vera' });
    assert.equal(create.isError, true);
    assert.match(textOf(create), /^auth\.permission_denied: create_vm needs permission admin\.hypervisor, which vera \(role viewer\)/);
    const run = await call(vera, 'run_command', { agent_id: vm, command: 'true' });
    assert.equal(run.isError, true);
    assert.match(textOf(run), /^auth\.permission_denied: run_command needs permission admin\.hypervisor/);
    const vms = ok(await call(vera, 'list_vms', { prefix: 'agent-mcp-vera' }));
    assert.equal(vms['total'], 0, 'the refused create_vm created nothing');
    const metrics = await (await fetch(`http://127.0.0.1:${server.ports.http}/metrics`)).text();
    assert.match(metrics, /^svc_mcp_tool_calls_total\{tool="create_vm",outcome="auth\.permission_denied"\} 1$/m);
  });

  test('the plaintext loopback listener refuses the endpoint; GET on it is 405', async () => {
    const res = await fetch(`http://127.0.0.1:${server.ports.http}/api/v2/admin/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(res.status, 403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'identity.operator_required');
    assert.match(body.error.message, /admin listener/);
    const cert = certs['alice'] as IssuedCert;
    const get = await mtlsRequest(
      { port: server.ports.admin, ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem },
      'GET',
      '/api/v2/admin/mcp',
      undefined,
      { accept: 'text/event-stream' },
    );
    assert.equal(get.status, 405);
  });

  test('discovery describes exactly what the server serves', async () => {
    const alice = await connect('alice');
    const cert = certs['alice'] as IssuedCert;
    const r = await mtlsRequest(
      { port: server.ports.admin, ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem },
      'GET',
      '/api/v2/admin/mcp/discovery',
    );
    assert.equal(r.status, 200, r.text);
    const d = JSON.parse(r.text) as Json & { tools: Json[]; resources: Json[] };
    assert.equal(d['available'], true);
    assert.equal(d['transport'], 'streamable-http');
    assert.deepEqual(d['endpoint'], {
      path: '/api/v2/admin/mcp',
      methods: ['POST'],
      listener: 'admin',
      url: `https://127.0.0.1:${server.ports.admin}/api/v2/admin/mcp`,
    });
    const listed = await alice.listTools();
    assert.deepEqual(
      d.tools.map(({ required_permission: _, ...t }) => t),
      listed.tools,
    );
    assert.deepEqual(Object.fromEntries(d.tools.map((t) => [t['name'], t['required_permission']])), {
      list_agents: 'admin.read',
      list_vms: 'admin.read',
      create_vm: 'admin.hypervisor',
      run_command: 'admin.hypervisor',
      read_task_log: 'admin.read',
    });
    assert.deepEqual(
      d.resources.map(({ required_permission: _, ...res }) => res),
      (await alice.listResources()).resources,
    );
    assert.ok((d['protocol_versions'] as string[]).includes(String(d['latest_protocol_version'])));
    assert.equal((d['authentication'] as Json)['scheme'], 'mtls');
    // The plaintext listener serves discovery to its trusted local caller (role admin by default).
    const local = await fetch(`http://127.0.0.1:${server.ports.http}/api/v2/admin/mcp/discovery`);
    assert.equal(local.status, 200);
    assert.deepEqual(await local.json(), d);
  });
});
