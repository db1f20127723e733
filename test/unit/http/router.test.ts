import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Router, type RouteMatch } from '../../../src/http/router.js';
import type { Handler } from '../../../src/http/types.js';

const ok: Handler = () => ({ status: 200, json: {} });

function found(m: RouteMatch): { pattern: string; params: Record<string, string> } {
  assert.ok(m.ok, m.ok ? '' : `expected a match, got ${m.error.code}`);
  return { pattern: m.route.pattern, params: m.params };
}

function failed(m: RouteMatch): { code: string; allow: readonly string[] | undefined } {
  assert.ok(!m.ok, 'expected no match');
  return { code: m.error.code, allow: m.allow };
}

function apiRouter(): Router {
  const r = new Router();
  r.add({ method: 'GET', path: '/api/v1/agents', handler: ok });
  r.add({ method: 'GET', path: '/api/v1/agents/:id', handler: ok });
  r.add({ method: 'DELETE', path: '/api/v1/agents/:id', handler: ok });
  r.add({ method: 'GET', path: '/api/v1/agents/stats', handler: ok });
  r.add({ method: 'POST', path: '/api/v1/agents/:id/sessions', handler: ok });
  r.add({ method: 'GET', path: '/api/v1/agents/:agentId/sessions/:sessionId', handler: ok });
  r.add({ method: 'GET', path: '/static/*', handler: ok });
  r.add({ method: 'GET', path: '/', handler: ok });
  return r;
}

void describe('Router.match', () => {
  const r = apiRouter();

  void test('binds path parameters by name', () => {
    assert.deepEqual(found(r.match('GET', '/api/v1/agents/a-1')), { pattern: '/api/v1/agents/:id', params: { id: 'a-1' } });
    assert.deepEqual(found(r.match('GET', '/api/v1/agents/a-1/sessions/s-2')).params, { agentId: 'a-1', sessionId: 's-2' });
  });

  void test('a static segment wins over a parameter', () => {
    assert.equal(found(r.match('GET', '/api/v1/agents/stats')).pattern, '/api/v1/agents/stats');
  });

  void test('falls back to the parameter route when the static route lacks the method', () => {
    assert.deepEqual(found(r.match('DELETE', '/api/v1/agents/stats')), { pattern: '/api/v1/agents/:id', params: { id: 'stats' } });
  });

  void test('percent-decodes parameters, including an encoded slash', () => {
    assert.equal(found(r.match('GET', '/api/v1/agents/a%20b')).params.id, 'a b');
    assert.equal(found(r.match('GET', '/api/v1/agents/a%2Fb')).params.id, 'a/b');
    assert.equal(found(r.match('GET', '/api/v1/agents/%C3%A9')).params.id, 'é');
  });

  void test('bad percent-encoding is 400 request.invalid, not 404', () => {
    assert.equal(failed(r.match('GET', '/api/v1/agents/%zz')).code, 'request.invalid');
    assert.equal(failed(r.match('GET', '/api/v1/agents/%E0%A4%A')).code, 'request.invalid');
    assert.equal(failed(r.match('GET', '/nothing/%')).code, 'request.invalid');
  });

  void test('dot segments are refused, encoded or not', () => {
    assert.equal(failed(r.match('GET', '/api/v1/../v1/agents')).code, 'request.invalid');
    assert.equal(failed(r.match('GET', '/static/%2e%2e/secret')).code, 'request.invalid');
    assert.equal(failed(r.match('GET', '/static/./x')).code, 'request.invalid');
  });

  void test('unknown paths are 404 route.not_found', () => {
    assert.equal(failed(r.match('GET', '/api/v2/agents')).code, 'route.not_found');
    assert.equal(failed(r.match('GET', '/api/v1/agents/a/unknown')).code, 'route.not_found');
  });

  void test('empty segments match nothing (no empty :id)', () => {
    assert.equal(failed(r.match('POST', '/api/v1/agents//sessions')).code, 'route.not_found');
  });

  void test('a known path with another method is 405 with the allowed methods', () => {
    assert.deepEqual(failed(r.match('PUT', '/api/v1/agents/x')), { code: 'route.method_not_allowed', allow: ['DELETE', 'GET', 'HEAD'] });
    assert.deepEqual(failed(r.match('GET', '/api/v1/agents/x/sessions')), { code: 'route.method_not_allowed', allow: ['POST'] });
  });

  void test('HEAD is served by the GET route', () => {
    assert.equal(found(r.match('HEAD', '/api/v1/agents')).pattern, '/api/v1/agents');
  });

  void test('one trailing slash is ignored; the root path works', () => {
    assert.equal(found(r.match('GET', '/api/v1/agents/')).pattern, '/api/v1/agents');
    assert.equal(found(r.match('GET', '/')).pattern, '/');
  });

  void test('a trailing * captures the rest of the path', () => {
    assert.deepEqual(found(r.match('GET', '/static/js/app.js')).params, { '*': 'js/app.js' });
    assert.equal(failed(r.match('GET', '/static')).code, 'route.not_found');
  });

  void test('methods are matched case-insensitively as upper case', () => {
    assert.equal(found(r.match('get', '/api/v1/agents')).pattern, '/api/v1/agents');
  });

  void test('any path matches or fails with a table code, never throws', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.constantFrom('api', 'v1', 'agents', '%', '%2', '..', '')), { maxLength: 6 }),
        (segs) => {
          const m = r.match('GET', `/${segs.join('/')}`);
          if (!m.ok) assert.ok(['route.not_found', 'route.method_not_allowed', 'request.invalid'].includes(m.error.code));
        },
      ),
    );
  });
});

void describe('Router.add', () => {
  void test('refuses duplicates and malformed patterns at registration', () => {
    const r = new Router();
    r.add({ method: 'GET', path: '/a/:id', handler: ok });
    assert.throws(() => r.add({ method: 'GET', path: '/a/:id', handler: ok }), /duplicate route/);
    assert.throws(() => r.add({ method: 'GET', path: 'a', handler: ok }), /must start with/);
    assert.throws(() => r.add({ method: 'GET', path: '/a/:x/:x', handler: ok }), /duplicate parameter/);
    assert.throws(() => r.add({ method: 'GET', path: '/a/*/b', handler: ok }), /last segment/);
    assert.throws(() => r.add({ method: 'GET', path: '/a/:1bad', handler: ok }), /bad parameter/);
  });

  void test('different parameter names at the same position are allowed', () => {
    const r = new Router();
    r.add({ method: 'GET', path: '/a/:id', handler: ok });
    r.add({ method: 'GET', path: '/a/:name/x', handler: ok });
    assert.deepEqual(found(r.match('GET', '/a/1')).params, { id: '1' });
    assert.deepEqual(found(r.match('GET', '/a/n/x')).params, { name: 'n' });
  });

  void test('body mode defaults to none for GET and json otherwise', () => {
    const r = new Router();
    assert.equal(r.add({ method: 'GET', path: '/g', handler: ok }).body, 'none');
    assert.equal(r.add({ method: 'POST', path: '/p', handler: ok }).body, 'json');
    assert.equal(r.add({ method: 'PUT', path: '/r', handler: ok, body: 'raw' }).body, 'raw');
  });

  void test('a response schema is compiled once into a serializer that shapes the output', () => {
    const r = new Router();
    const route = r.add({
      method: 'GET',
      path: '/s',
      handler: ok,
      responseSchema: { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } }, required: ['id'] },
    });
    assert.ok(route.serialize);
    // Fields outside the schema are dropped; types are coerced as the schema says.
    assert.equal(route.serialize({ id: 'x', n: 2.0, secret: 'no' }), '{"id":"x","n":2}');
    assert.equal(r.list().length, 1);
  });
});
