/**
 * Certificate and key generation with @peculiar/x509 over Node's WebCrypto: ECDSA P-256 keys,
 * SHA-256 signatures, PEM in and out. The only module that imports @peculiar/x509 (which needs
 * the reflect-metadata polyfill loaded first).
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import {
  createPrivateKey,
  createPublicKey,
  randomBytes,
  webcrypto,
  X509Certificate as NodeX509Certificate,
  type KeyObject,
} from 'node:crypto';
import { SvcError } from '../core/errors.js';

// @peculiar/x509 types its provider with DOM's Crypto, absent here (lib ES2023): Node's webcrypto is it.
x509.cryptoProvider.set(webcrypto);

const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;
/** notBefore is set this far before "now" so that peers with a slightly slow clock accept it. */
const CLOCK_SKEW_MS = 5 * 60_000;

/** A CA able to sign: its certificate and its (non-extractable) signing key. */
export interface Signer {
  readonly cert: x509.X509Certificate;
  readonly certPem: string;
  readonly key: webcrypto.CryptoKey;
}

/** A subject alternative name entry. */
export interface SanEntry {
  type: 'dns' | 'ip' | 'url';
  value: string;
}

/** What a leaf certificate says about its holder. */
export interface LeafSpec {
  commonName: string;
  sans: SanEntry[];
  usage: 'serverAuth' | 'clientAuth';
  now: Date;
  ttlMs: number;
}

/** A leaf certificate and its private key, both PEM. */
export interface IssuedPem {
  certPem: string;
  /** PKCS#8 PEM ("PRIVATE KEY"). */
  keyPem: string;
  notBefore: Date;
  notAfter: Date;
  /** Hex serial number. */
  serialNumber: string;
}

/** A random positive 128-bit serial (top bit clear so the DER INTEGER stays positive). */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x10;
  return bytes.toString('hex');
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/**
 * A new self-signed CA (basicConstraints cA, pathLen 0; keyCertSign, cRLSign), valid from
 * `now` (minus clock skew) for `ttlMs`. Returns the signer and the key PEM to store.
 */
export async function createCaCertificate(opts: {
  trustDomain: string;
  now: Date;
  ttlMs: number;
}): Promise<{ signer: Signer; keyPem: string }> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: [`sandboxd CA ${opts.trustDomain}`] }, { O: ['sandboxd'] }],
    notBefore: new Date(opts.now.getTime() - CLOCK_SKEW_MS),
    notAfter: new Date(opts.now.getTime() + opts.ttlMs),
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const keyPem = await privateKeyPem(keys.privateKey);
  return { signer: { cert, certPem: cert.toString('pem'), key: keys.privateKey }, keyPem };
}

/**
 * Loads a CA from PEM: the certificate must be a CA certificate, the key an EC P-256 key (PKCS#8
 * or SEC1 PEM) that matches it. Rejects with a clear message otherwise.
 */
export async function loadSigner(certPem: string, keyPem: string, where: string): Promise<Signer> {
  let nodeCert: NodeX509Certificate;
  try {
    nodeCert = new NodeX509Certificate(certPem);
  } catch (err) {
    throw new SvcError('server.internal', `${where}: ca.pem is not a PEM certificate (${(err as Error).message})`);
  }
  let keyObject;
  try {
    keyObject = createPrivateKey(keyPem);
  } catch (err) {
    throw new SvcError('server.internal', `${where}: ca-key.pem is not a PEM private key (${(err as Error).message})`);
  }
  if (keyObject.asymmetricKeyType !== 'ec' || keyObject.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new SvcError('server.internal', `${where}: ca-key.pem must be an ECDSA P-256 key`);
  }
  if (!nodeCert.ca) throw new SvcError('server.internal', `${where}: ca.pem is not a CA certificate (basicConstraints cA is not set)`);
  if (!nodeCert.checkPrivateKey(keyObject)) throw new SvcError('server.internal', `${where}: ca-key.pem does not belong to ca.pem`);
  const der = keyObject.export({ type: 'pkcs8', format: 'der' });
  const key = await webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, false, ['sign']);
  return { cert: new x509.X509Certificate(certPem), certPem, key };
}

async function authorityKeyId(issuer: Signer): Promise<x509.AuthorityKeyIdentifierExtension> {
  const ski = issuer.cert.getExtension(x509.SubjectKeyIdentifierExtension);
  if (ski !== null) return new x509.AuthorityKeyIdentifierExtension(ski.keyId);
  return x509.AuthorityKeyIdentifierExtension.create(issuer.cert.publicKey);
}

/**
 * Issues a leaf certificate signed by `issuer` with a fresh P-256 key: basicConstraints cA=false,
 * keyUsage digitalSignature, the one extended key usage, the SANs, SKI and AKI. notAfter is
 * clamped to the CA's own notAfter.
 */
export async function issueLeaf(issuer: Signer, spec: LeafSpec): Promise<IssuedPem> {
  const keys = await generateKeys();
  const signed = await signLeaf(issuer, keys.publicKey, spec);
  return { ...signed, keyPem: await privateKeyPem(keys.privateKey) };
}

/** The largest CSR PEM accepted, in characters (a P-256 CSR is about 500). */
export const MAX_CSR_PEM_CHARS = 8192;

/** A verified certificate signing request: its subject public key, ready to certify. */
export interface VerifiedCsr {
  readonly publicKey: webcrypto.CryptoKey;
}

function csrInvalid(message: string): SvcError {
  return new SvcError('bootstrap.csr_invalid', message);
}

/**
 * Parses and checks a PKCS#10 certificate signing request (PEM, "CERTIFICATE REQUEST"): exactly
 * one PEM block, its self-signature must verify, and its key must be ECDSA P-256 (the key type of
 * every sandboxd certificate). Only the public key is used: the subject and any requested
 * extensions are ignored (the issuer decides the identity). Rejects with bootstrap.csr_invalid.
 */
export async function verifyCsr(csrPem: string): Promise<VerifiedCsr> {
  if (csrPem.length > MAX_CSR_PEM_CHARS) throw csrInvalid(`the CSR is longer than ${MAX_CSR_PEM_CHARS} characters`);
  const blocks = csrPem.match(/-----BEGIN ([A-Z0-9 ]+)-----/g) ?? [];
  if (blocks.length !== 1 || !csrPem.includes('-----BEGIN CERTIFICATE REQUEST-----'))
    throw csrInvalid('the CSR must be exactly one PEM block "CERTIFICATE REQUEST" (PKCS#10)');
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(csrPem);
  } catch {
    throw csrInvalid('the CSR is not a parseable PKCS#10 request');
  }
  let spki: KeyObject;
  try {
    spki = createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: 'der', type: 'spki' });
  } catch {
    throw csrInvalid('the CSR public key cannot be read');
  }
  if (spki.asymmetricKeyType !== 'ec' || spki.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw csrInvalid(`the CSR key is ${spki.asymmetricKeyType ?? 'unknown'}; only ECDSA P-256 keys are accepted`);
  const valid = await csr.verify().catch(() => false);
  if (!valid) throw csrInvalid('the CSR signature does not verify with its own public key');
  const der = spki.export({ type: 'spki', format: 'der' });
  const publicKey = await webcrypto.subtle.importKey('spki', der, KEY_ALGORITHM, true, ['verify']);
  return { publicKey };
}

/** A certificate signed for a key whose private half the caller never saw (a CSR's). */
export type IssuedForKey = Omit<IssuedPem, 'keyPem'>;

/** issueLeaf for the public key of a PKCS#10 CSR (checked by verifyCsr: bootstrap.csr_invalid otherwise). */
export async function issueLeafForCsr(issuer: Signer, csrPem: string, spec: LeafSpec): Promise<IssuedForKey> {
  const { publicKey } = await verifyCsr(csrPem);
  return signLeaf(issuer, publicKey, spec);
}

async function signLeaf(issuer: Signer, publicKey: webcrypto.CryptoKey, spec: LeafSpec): Promise<IssuedForKey> {
  const notBefore = new Date(spec.now.getTime() - CLOCK_SKEW_MS);
  const wanted = spec.now.getTime() + spec.ttlMs;
  const notAfter = new Date(Math.min(wanted, issuer.cert.notAfter.getTime()));
  const serial = serialNumber();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject: [{ CN: [spec.commonName] }],
    issuer: issuer.cert.subjectName,
    notBefore,
    notAfter,
    signingAlgorithm: SIGNING_ALGORITHM,
    publicKey,
    signingKey: issuer.key,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(
        [spec.usage === 'serverAuth' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth],
        false,
      ),
      new x509.SubjectAlternativeNameExtension(spec.sans, false),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await authorityKeyId(issuer),
    ],
  });
  return { certPem: cert.toString('pem'), notBefore, notAfter, serialNumber: serial };
}
