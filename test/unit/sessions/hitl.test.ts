import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { registerHitlRoutes } from '../../../src/sessions/hitl-routes.js';
import { SvcError } from '../../../src/core/errors.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { cursorLine, detectPrompt, kHitlTailBytes, OutputTail } from '../../../src/sessions/hitl-detector.js';
import { HitlService, parseHitlResponse } from '../../../src/sessions/hitl.js';

const kind = (raw: string, rows = 24): string | null => detectPrompt(raw, rows)?.kind ?? null;

describe('HITL detector', () => {
  test('recognises the documented prompts at the cursor', () => {
    const cases: [string, string][] = [
      ['$ sudo apt install x\r\n[sudo] password for agent: ', 'sudo'],
      ["agent@10.0.0.5's password: ", 'password'],
      ["Password for 'https://user@github.com': ", 'password'],
      ["Enter passphrase for key '/home/agent/.ssh/id_ed25519': ", 'password'],
      ['New password:', 'password'],
      ['Password (again): ', 'password'],
      ['Do you want to continue? [Y/n] ', 'confirm'],
      ['Overwrite file.txt? [y/N]: ', 'confirm'],
      ['Are you sure you want to continue connecting (yes/no/[fingerprint])? ', 'confirm'],
      ['Proceed (y/n)? ', 'confirm'],
      ['Apply changes [y/n/q]? ', 'confirm'],
      ['Continue?', 'confirm'],
      ['Really delete 3 files?', 'confirm'],
      ['Press Enter to continue...', 'press_enter'],
      ['Press any key to exit ', 'press_enter'],
      ['press RETURN', 'press_enter'],
    ];
    for (const [raw, k] of cases) assert.equal(kind(`some output\r\n${raw}`), k, raw);
  });

  test('shell prompts, ordinary output and mid-line mentions are not prompts', () => {
    for (const raw of [
      'agent@vm:~$ ',
      'root@vm:/# ',
      '> ',
      'Compiling... 45%',
      'the password: field is required',
      'build finished',
      'Continue? maybe later',
      '',
    ]) {
      assert.equal(kind(`x\r\n${raw}\r\n`), null, JSON.stringify(raw));
      assert.equal(
        kind(raw === 'the password: field is required' || raw === 'Continue? maybe later' ? raw : `x\r\n${raw}`),
        null,
        JSON.stringify(raw),
      );
    }
  });

  test('a prompt that was answered or scrolled away is no longer pending', () => {
    assert.equal(kind('Continue? [y/N] y\r\n'), null, 'answered: echo and newline');
    assert.equal(kind('Continue? [y/N] y'), null, 'answered: echo');
    assert.equal(kind('[sudo] password for agent: \r\n'), null, 'password entered (no echo, then Enter)');
    assert.equal(kind('Password: \r\nLogin successful\r\n$ '), null);
    assert.equal(kind('Continue? [y/N] \x1b[?25l\x1b[K'), 'confirm', 'invisible sequences after the prompt do not matter');
  });

  test('ANSI colours, OSC titles and full-screen redraws (tmux) are handled with the real geometry', () => {
    assert.equal(kind('\x1b]0;title\x07\x1b[1;31mDo you want to continue?\x1b[0m \x1b[32m[Y/n]\x1b[0m '), 'confirm');
    // tmux redraws rows with cursor positioning and then puts the cursor after the prompt.
    const redraw = '\x1b[H\x1b[2J\x1b[1;1Hline one\x1b[K\x1b[2;1HPassword: \x1b[K\x1b[3;1H\x1b[K\x1b[2;11H';
    assert.equal(kind(redraw), 'password');
    assert.equal(kind(`${redraw}\x1b[3;1H`), null, 'cursor moved to another row');
    // Erase-in-line after a carriage return removes the prompt.
    assert.equal(kind('Password: \r\x1b[K'), null);
    // Scrolling at the bottom of a 3-row terminal keeps only the last rows.
    assert.deepEqual(cursorLine('a\r\nb\r\nc\r\nPress Enter', 3), { before: 'Press Enter', after: '' });
    // Text right of the cursor means the cursor is not at the end of the prompt.
    assert.equal(kind('Continue? [y/N] \x1b[5Dabc'), null);
    // Alternate screen: a prompt inside a full-screen app disappears when it exits.
    assert.equal(kind('$ vim\r\n\x1b[?1049hOverwrite? [y/N] \x1b[?1049l'), null);
  });

  test('fuzz: arbitrary output never throws', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), fc.integer({ min: 1, max: 300 }), (s, rows) => {
        const r = detectPrompt(s, rows);
        assert.ok(r === null || r.prompt.length <= 240);
      }),
      { numRuns: 2000 },
    );
    const ansi = fc
      .array(
        fc.oneof(
          fc.constantFrom(
            '\x1b[',
            '\x1b]',
            '\x1b',
            '\r',
            '\n',
            '\b',
            '\t',
            ';',
            '?',
            'H',
            'K',
            'J',
            '1',
            '2',
            'Password: ',
            '[y/N] ',
            '\x07',
            '\x1b\\',
          ),
        ),
        { maxLength: 80 },
      )
      .map((a) => a.join(''));
    fc.assert(
      fc.property(ansi, (s) => void detectPrompt(s, 24)),
      { numRuns: 2000 },
    );
  });

  test('the tail is bounded and never starts inside a cut escape sequence', () => {
    const t = new OutputTail();
    for (let i = 0; i < 100; i++) t.push(new TextEncoder().encode(`\x1b[31mline ${i}\x1b[0m\r\n`.repeat(20)));
    assert.ok(t.bytes < kHitlTailBytes * 2);
    const text = t.text();
    assert.ok(text.length <= kHitlTailBytes);
    assert.ok(text.startsWith('\n') || text.startsWith('\x1b'));
  });
});

describe('HitlService and routes', () => {
  function setup(): {
    svc: HitlService;
    written: string[];
    router: Router;
    sessions: Map<string, { agentId: string; commandId: string; rows: number }>;
  } {
    const written: string[] = [];
    const sessions = new Map([['s1', { agentId: 'a1', commandId: 'c1', rows: 24 }]]);
    let n = 0;
    const svc = new HitlService({
      writeInput: (sid, data) => {
        if (sid === 'gone') return Promise.reject(new SvcError('server.unavailable', 'agent away'));
        written.push(`${sid}:${Buffer.from(data).toString()}`);
        return Promise.resolve();
      },
      sessionInfo: (sid) => sessions.get(sid),
      settleMs: 10,
      now: () => Date.parse('2026-01-02T03:04:05.000Z'),
      newId: () => `hitl-${++n}`,
    });
    const router = new Router();
    registerHitlRoutes(router, { hitl: svc });
    return { svc, written, router, sessions };
  }
  const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
  /** Waits out settleMs (10 ms): the detector's timer, armed by the output before this pause, has run when it ends. */
  const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 60));

  test('a waiting prompt appears in GET /api/v1/hitl; respond writes the answer and Enter, then resolves', async () => {
    const { svc, written, router } = setup();
    svc.output('s1', enc('Reading package lists... Done\r\nDo you want to continue? [Y/n] '));
    assert.deepEqual(
      (await inject(router, { method: 'GET', url: '/api/v1/hitl' })).json(),
      { requests: [] },
      'not before the output settles',
    );
    await settle();
    const list = (await inject(router, { method: 'GET', url: '/api/v1/hitl' })).json();
    assert.deepEqual(list, {
      requests: [
        {
          id: 'hitl-1',
          session_id: 's1',
          agent_id: 'a1',
          command_id: 'c1',
          kind: 'confirm',
          prompt: 'Do you want to continue? [Y/n]',
          created_at: '2026-01-02T03:04:05.000Z',
        },
      ],
    });
    const res = await inject(router, { method: 'POST', url: '/api/v1/hitl/hitl-1/respond', body: { response: 'y' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { resolved: true });
    assert.deepEqual(written, ['s1:y\r']);
    assert.deepEqual(svc.list(), []);
    const again = await inject(router, { method: 'POST', url: '/api/v1/hitl/hitl-1/respond', body: { response: 'y' } });
    assert.equal(again.status, 404);
    assert.equal((again.json() as { error: { code: string } }).error.code, 'hitl.not_found');
    svc.output('s1', enc('y\r\n'));
    await settle();
    assert.deepEqual(svc.list(), [], 'the answered prompt is not raised again');
  });

  test('one request per session: the same prompt keeps its id, new output withdraws it, a new prompt replaces it', async () => {
    const { svc } = setup();
    svc.output('s1', enc('Password: '));
    await settle();
    assert.equal(svc.list()[0]?.id, 'hitl-1');
    svc.output('s1', enc(''));
    svc.output('s1', enc('\x1b[?25h'));
    await settle();
    assert.deepEqual(
      svc.list().map((r) => r.id),
      ['hitl-1'],
    );
    svc.output('s1', enc('\r\nPress Enter to continue'));
    await settle();
    assert.deepEqual(
      svc.list().map((r) => [r.id, r.kind]),
      [['hitl-2', 'press_enter']],
    );
    svc.output('s1', enc('\r\nworking...\r\n'));
    await settle();
    assert.deepEqual(svc.list(), []);
    svc.output('s1', enc('Continue? '));
    await settle();
    svc.sessionClosed('s1');
    assert.deepEqual(svc.list(), []);
    svc.stop();
  });

  test('respond validation (400) and unknown ids (404); a write failure leaves the request pending', async () => {
    const { svc, router, sessions } = setup();
    for (const body of [{}, { response: 5 }, { response: 'a\nb' }, { response: 'x', extra: 1 }, { response: 'x'.repeat(4097) }, 'str']) {
      const r = await inject(router, { method: 'POST', url: '/api/v1/hitl/any/respond', body });
      assert.equal(r.status, 400, JSON.stringify(body));
    }
    assert.equal((await inject(router, { method: 'POST', url: '/api/v1/hitl/nope/respond', body: { response: '' } })).status, 404);
    sessions.set('gone', { agentId: 'a2', commandId: 'c2', rows: 24 });
    svc.output('gone', enc('Password: '));
    await settle();
    const id = svc.list()[0]?.id ?? '';
    const r = await inject(router, { method: 'POST', url: `/api/v1/hitl/${id}/respond`, body: { response: 'secret' } });
    assert.equal(r.status, 503);
    assert.equal(svc.get(id)?.id, id);
    assert.equal(parseHitlResponse({ response: '' }), '');
  });
});
