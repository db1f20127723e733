/**
 * `sandboxd certs …`: issue client certificates from the built-in CA (creating the CA under
 * SECRETS_DIR first when it does not exist yet). Prints file names and identities, never key
 * material.
 */
import { parseArgs } from 'node:util';
import { SvcError } from '../core/errors.js';
import { isValidName } from './spiffe.js';
import {
  AGENT_CERT_TTL_SECONDS,
  ensureCa,
  OPERATOR_CERT_TTL_SECONDS,
  writeAgentBundle,
  writeOperatorBundle,
  type BundleFiles,
} from './ca.js';
import { errorMessage } from '../util/error-message.js';

/** Where output goes (process.stdout / process.stderr fit). */
export interface CommandIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

const USAGE = `usage: sandboxd certs <command> [options]

commands:
  issue-agent --instance-id ID --out DIR [--ttl-seconds N]
      Issue an agent client certificate (URI SAN spiffe://<trust-domain>/agent/ID) and write
      DIR/ca.pem, DIR/agent.pem and DIR/agent-key.pem (mode 0600).
  issue-operator --name NAME --out DIR [--ttl-seconds N]
      Issue an operator client certificate (URI SAN spiffe://<trust-domain>/operator/NAME) and
      write DIR/ca.pem, DIR/operator.pem and DIR/operator-key.pem (mode 0600).

ID and NAME: 1-128 characters of A-Z a-z 0-9 . _ -
--ttl-seconds: validity, default ${AGENT_CERT_TTL_SECONDS} (30 days) for agents, ${OPERATOR_CERT_TTL_SECONDS} (30 days) for operators.

The CA is $SECRETS_DIR/ca.pem and $SECRETS_DIR/ca-key.pem; it is created (with the server
certificate) when missing. The trust domain is SVC_TRUST_DOMAIN (default sandbox.local).
Exit status: 0 done, 1 failed, 2 usage error.
`;

class UsageError extends Error {}

function parseTtl(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[1-9][0-9]{0,9}$/.test(raw)) throw new UsageError(`--ttl-seconds must be a positive integer, got "${raw}"`);
  return Number(raw);
}

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`);
  return value;
}

/** Checked before the CA is touched, so a typo creates nothing. */
function validName(value: string, what: string): string {
  if (!isValidName(value)) throw new UsageError(`invalid ${what} ${JSON.stringify(value)}: use 1-128 of A-Z a-z 0-9 . _ -`);
  return value;
}

function describe(files: BundleFiles): string {
  return `${files.spiffeId}\n  certificate ${files.cert}\n  private key ${files.key} (mode 0600)\n  CA          ${files.ca}\n  valid until ${files.notAfter.toISOString()}\n`;
}

/**
 * Runs `sandboxd certs <argv…>`. Resolves to the exit code (0 done, 1 failed, 2 usage error);
 * never rejects for expected failures.
 */
export async function runCertsCommand(argv: string[], env: { secretsDir: string; trustDomain: string }, io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    (sub === undefined ? io.stderr : io.stdout).write(USAGE);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'issue-agent' && sub !== 'issue-operator') {
    io.stderr.write(`sandboxd certs: unknown command "${sub}"\n\n${USAGE}`);
    return 2;
  }
  try {
    const { values } = parseArgs({
      args: rest,
      strict: true,
      allowPositionals: false,
      options: {
        'instance-id': { type: 'string' },
        name: { type: 'string' },
        out: { type: 'string' },
        'ttl-seconds': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help === true) {
      io.stdout.write(USAGE);
      return 0;
    }
    const ttlSeconds = parseTtl(values['ttl-seconds']);
    const out = required(values.out, '--out DIR');
    const ttl = ttlSeconds === undefined ? {} : { ttlSeconds };
    let files: BundleFiles;
    if (sub === 'issue-agent') {
      if (values.name !== undefined) throw new UsageError('issue-agent takes --instance-id, not --name');
      const instanceId = validName(required(values['instance-id'], '--instance-id ID'), 'instance id');
      const ca = await ensureCa({ secretsDir: env.secretsDir, trustDomain: env.trustDomain });
      files = await writeAgentBundle(out, ca, { instanceId, ...ttl });
    } else {
      if (values['instance-id'] !== undefined) throw new UsageError('issue-operator takes --name, not --instance-id');
      const name = validName(required(values.name, '--name NAME'), 'operator name');
      const ca = await ensureCa({ secretsDir: env.secretsDir, trustDomain: env.trustDomain });
      files = await writeOperatorBundle(out, ca, { name, ...ttl });
    }
    io.stdout.write(`issued ${describe(files)}`);
    return 0;
  } catch (err) {
    // parseArgs reports unknown or malformed flags with a TypeError carrying an ERR_PARSE_ARGS_* code.
    const parseError = typeof (err as { code?: unknown }).code === 'string' && (err as { code: string }).code.startsWith('ERR_PARSE_ARGS');
    if (err instanceof UsageError || parseError || (err instanceof SvcError && err.code === 'request.invalid')) {
      io.stderr.write(`sandboxd certs ${sub}: ${(err as Error).message}\n(see sandboxd certs --help)\n`);
      return 2;
    }
    io.stderr.write(`sandboxd certs ${sub}: ${errorMessage(err)}\n`);
    return 1;
  }
}
