/**
 * A PKCS#10 certificate signing request (RFC 2986) over an ECDSA P-256 key, built with node:crypto
 * alone: the agent bundle carries no X.509 library, and a CSR is five DER fields.
 *
 *   CertificationRequest ::= SEQUENCE {
 *     certificationRequestInfo SEQUENCE { version INTEGER 0, subject Name,
 *                                         subjectPKInfo SubjectPublicKeyInfo, attributes [0] {} },
 *     signatureAlgorithm       SEQUENCE { ecdsa-with-SHA256 },
 *     signature                BIT STRING }
 *
 * The subject is CN=<commonName>; sandboxd ignores it (the token decides the identity) but a
 * readable CSR helps whoever looks at one.
 */
import { createPublicKey, sign, type KeyObject } from 'node:crypto';

const OID_COMMON_NAME = Buffer.from([0x06, 0x03, 0x55, 0x04, 0x03]);
const OID_ECDSA_WITH_SHA256 = Buffer.from([0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]);

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

/** The PEM CSR for `privateKey` (an EC P-256 KeyObject), subject CN=`commonName`. */
export function buildCsrPem(privateKey: KeyObject, commonName: string): string {
  if (privateKey.asymmetricKeyType !== 'ec' || privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error('the CSR key must be an ECDSA P-256 key');
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const subject = der(0x30, der(0x31, der(0x30, OID_COMMON_NAME, der(0x0c, Buffer.from(commonName, 'utf8')))));
  const info = der(0x30, der(0x02, Buffer.from([0])), subject, spki, der(0xa0));
  // ECDSA signatures from node:crypto are DER (r, s) by default: what X.509 wants.
  const signature = sign('sha256', info, privateKey);
  const csr = der(0x30, info, der(0x30, OID_ECDSA_WITH_SHA256), der(0x03, Buffer.from([0]), signature));
  const b64 = csr.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE REQUEST-----\n${b64}-----END CERTIFICATE REQUEST-----\n`;
}
