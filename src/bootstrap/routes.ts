/**
 * Bootstrap routes (spec 4.10; README "Secure bootstrap"), on the shared router:
 *
 *   POST /api/v1/bootstrap-enrollment/consume  no operator identity (the single-use token is the
 *                                               credential) {token, csr} → 200 certificate
 *   GET  /api/v2/admin/bootstrap/readiness     admin.read → the client-safe posture
 *
 * Consume reads its body raw (at most 16 KiB) and parses it itself, so that every refusal is a
 * code of the enrollment taxonomy and no parser message can echo the token. Answers carry
 * Cache-Control: no-store (a certificate, a posture: nothing a proxy should keep).
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { Router } from '../http/router.js';
import { BOOTSTRAP_CONSUME_PATH } from '../wire/bootstrap.js';
import { CONSUME_MAX_BODY_BYTES, type BootstrapEnrollment } from './service.js';

export const BOOTSTRAP_READINESS_PATH = '/api/v2/admin/bootstrap/readiness';

const NO_STORE = { 'cache-control': 'no-store' };

export function registerBootstrapRoutes(router: Router, d: { enrollment: BootstrapEnrollment; identity: OperatorIdentity }): void {
  router.add({
    method: 'POST',
    path: BOOTSTRAP_CONSUME_PATH,
    body: 'raw',
    maxBodyBytes: CONSUME_MAX_BODY_BYTES,
    bodyTimeoutMs: 10_000,
    handler: async (req) => ({ status: 200, headers: NO_STORE, json: await d.enrollment.consume(req.rawBody) }),
  });

  router.add({
    method: 'GET',
    path: BOOTSTRAP_READINESS_PATH,
    handler: (req) => {
      d.identity.require(req, 'admin.read');
      return { status: 200, headers: NO_STORE, json: d.enrollment.readiness() };
    },
  });
}
