/**
 * The conformance scenarios' test bed: a real sandboxd (the sessions harness's server, on
 * 127.0.0.1), a real sandbox-agent with its own tmux server, and fresh sessions of two kinds:
 *
 * - `tmux`: created through REST (`POST /api/v1/agents/{id}/sessions`, bash in a managed tmux
 *   session), dialled at `/api/v1/sessions/{id}/pty`;
 * - `native`: a new UUIDv7 dialled at `/agents/{instance_id}/sessions/{id}/attach`, started by its
 *   first join (`session_backend: native`, `session_class: direct`, an argv and a terminal size).
 *
 * The native variant runs when the server offers it: {@link ConformanceBed.nativeUnavailable} says
 * why not otherwise (the attach route refused, or binding_hello lists native/direct unavailable).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Role } from '../../src/sessions/binding/codes.js';
import { newFrameId } from '../../src/sessions/binding/values.js';
import { ConformanceClient, JSON_ONLY, upgradeStatus, type JoinOptions } from './pty-conformance-kit.js';
import { SessionLedger, payloadOf, type SeenFrame } from './pty-conformance-rules.js';
import { spawnSessionAgent, startSessionsServer, waitForAgent, type AgentProc, type SessionsServer } from './sessions-harness.js';

export type VariantName = 'tmux' | 'native';
export const VARIANTS: readonly VariantName[] = ['tmux', 'native'];

/** The shell a native session runs: no rc files, so it starts the same everywhere. */
const NATIVE_START: NonNullable<JoinOptions['start']> = {
  session_backend: 'native',
  session_class: 'direct',
  argv: ['/bin/bash', '--noprofile', '--norc'],
  terminal_size: { cols: 120, rows: 30 },
};

export class ConformanceBed {
  readonly srv: SessionsServer;
  readonly agent: AgentProc;
  readonly agentId: string;
  readonly #dir: string;
  readonly #clients: ConformanceClient[] = [];
  #sessions = 0;

  private constructor(dir: string, srv: SessionsServer, agent: AgentProc, agentId: string) {
    this.#dir = dir;
    this.srv = srv;
    this.agent = agent;
    this.agentId = agentId;
  }

  static async start(agentId: string): Promise<ConformanceBed> {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-ptyconf-'));
    const srv = await startSessionsServer(dir);
    const agent = await spawnSessionAgent(srv, agentId);
    await waitForAgent(srv, agent, agentId);
    return new ConformanceBed(dir, srv, agent, agentId);
  }

  async stop(): Promise<void> {
    for (const c of this.#clients) c.terminate();
    await this.srv.stop();
    await this.agent.kill();
    await rm(this.#dir, { recursive: true, force: true });
  }

  ptyUrl(sessionId: string): string {
    return `${this.srv.wsBase}/api/v1/sessions/${encodeURIComponent(sessionId)}/pty`;
  }

  attachUrl(sessionId: string, instanceId: string = this.agentId): string {
    return `${this.srv.wsBase}/agents/${encodeURIComponent(instanceId)}/sessions/${encodeURIComponent(sessionId)}/attach`;
  }

  /** Why native/direct sessions cannot be started here, or undefined when they can. */
  async nativeUnavailable(): Promise<string | undefined> {
    const url = this.attachUrl(newFrameId());
    const up = await upgradeStatus(url, JSON_ONLY);
    if (up.status !== 101) return `the attach route answered HTTP ${up.status} for a new session id`;
    const probe = await ConformanceClient.open(url, { ledger: new SessionLedger(), name: 'native-probe' });
    probe.terminate();
    const pair = probe.hello.session_host.pairs.find((p) => p.session_backend === 'native' && p.session_class === 'direct');
    if (pair?.available !== true) return `binding_hello lists native/direct as ${JSON.stringify(pair ?? 'absent')}`;
    return undefined;
  }

  /** A new session of `variant` (tmux: created now; native: started by its first join). */
  async session(variant: VariantName): Promise<ConformanceSession> {
    const n = ++this.#sessions;
    if (variant === 'native') {
      const id = newFrameId();
      return new ConformanceSession(this, variant, id, this.attachUrl(id), NATIVE_START);
    }
    const r = await this.srv.json<{ session_id: string }>('POST', `/api/v1/agents/${this.agentId}/sessions`, { session_name: `conf-${n}` });
    assert.equal(r.status, 200, `create session: ${JSON.stringify(r.body)}`);
    return new ConformanceSession(this, variant, r.body.session_id, this.ptyUrl(r.body.session_id), undefined);
  }

  /** Keeps `c` for the teardown (every client is terminated when the bed stops). */
  adopt(c: ConformanceClient): ConformanceClient {
    this.#clients.push(c);
    return c;
  }
}

/** One session under test: its clients share a ledger (one sequence, one frame). */
export class ConformanceSession {
  readonly variant: VariantName;
  readonly id: string;
  readonly url: string;
  readonly ledger = new SessionLedger();
  /** What the first joiner sends to start the session (native), else nothing. */
  readonly start: JoinOptions['start'];
  readonly #bed: ConformanceBed;

  constructor(bed: ConformanceBed, variant: VariantName, id: string, url: string, start: JoinOptions['start']) {
    this.#bed = bed;
    this.variant = variant;
    this.id = id;
    this.url = url;
    this.start = start;
  }

  /** A client of this session, dialled at its URL (or another URL of the same session). */
  async open(name: string, protocols: string[] = JSON_ONLY, url: string = this.url): Promise<ConformanceClient> {
    return this.#bed.adopt(await ConformanceClient.open(url, { ledger: this.ledger, name, protocols }));
  }

  /**
   * Opens a client and makes it the session's first member: it joins as controller (with the
   * start parameters of a native session), gets its join's MembershipChanged and Keyframe, and
   * waits until the shell runs commands.
   */
  async firstController(name = 'controller', protocols: string[] = JSON_ONLY): Promise<Joined> {
    const client = await this.open(name, protocols);
    const joined = await joinFully(client, 'controller', this.start === undefined ? { label: name } : { label: name, start: this.start });
    assert.equal(payloadOf(joined.assigned, 'RoleAssigned').role, 'controller', `${name}: the first joiner controls`);
    await client.waitForShell(protocols.includes('pty-ws.v1.binary'));
    return joined;
  }

  /** Opens a client that joins with `role` (no start parameters: the session runs already). */
  async member(name: string, role: Role, protocols: string[] = JSON_ONLY): Promise<Joined> {
    return await joinFully(await this.open(name, protocols), role, { label: name });
  }
}

/** A client after its join: the join's request id and the three frames that answered it. */
export interface Joined {
  readonly client: ConformanceClient;
  readonly id: string;
  readonly assigned: SeenFrame;
  readonly membership: SeenFrame;
  /**
   * The join's connection-local Keyframe, or the PTY Error KEYFRAME_UNAVAILABLE in its place (a
   * snapshot late on a loaded machine): scenarios about the Keyframe itself check its kind.
   */
  readonly keyframe: SeenFrame;
}

/** Joins and takes the answer's RoleAssigned, MembershipChanged and (connection-local) Keyframe. */
export async function joinFully(client: ConformanceClient, role: Role, opts: JoinOptions): Promise<Joined> {
  const { id, assigned } = await client.join(role, opts);
  const membership = await client.nextKind('MembershipChanged');
  const keyframe = await client.nextKeyframe();
  return { client, id, assigned, membership, keyframe };
}

/** A scenario: a test on a fresh session of the suite's variant; `note` adds a diagnostic line. */
export type Scenario = (name: string, fn: (s: ConformanceSession, note: (msg: string) => void) => Promise<void>) => void;

/**
 * One describe per variant, titled `title`, whose scenarios `define` adds; a variant the server
 * does not offer (native, until it does) has its scenarios skipped with the reason.
 */
export function forEachVariant(title: string, bedOf: () => ConformanceBed, define: (scenario: Scenario) => void): void {
  for (const variant of VARIANTS) {
    void describe(`${title} on ${variant} sessions`, () => {
      let unavailable: string | undefined;
      before(async () => {
        if (variant === 'native') unavailable = await bedOf().nativeUnavailable();
      });
      define((name, fn) => {
        test(name, async (t) => {
          if (unavailable !== undefined) return t.skip(`${variant} sessions are not available: ${unavailable}`);
          await fn(await bedOf().session(variant), (msg) => t.diagnostic(msg));
        });
      });
    });
  }
}

/** The file's bed: started before its tests (one server and agent named `agent`), stopped after them. */
export function useConformanceBed(agent: string): () => ConformanceBed {
  let bed: ConformanceBed | undefined;
  before(async () => {
    bed = await ConformanceBed.start(agent);
  });
  after(async () => {
    await bed?.stop();
  });
  return () => {
    if (bed === undefined) throw new Error('the conformance bed is not started');
    return bed;
  };
}
