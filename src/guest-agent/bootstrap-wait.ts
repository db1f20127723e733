/**
 * Waiting for bootstrap material (`--bootstrap-wait FILE`, README "Checkpoints and warm pools"):
 * a qemu guest created with `enrollment: deferred` boots with no identity and its agent polls a
 * fw_cfg file (`/sys/firmware/qemu_fw_cfg/by_name/opt/sandboxd/bootstrap.json/raw`) that holds a
 * placeholder of a fixed size. The VM is saved in that state (a pre-enrollment checkpoint). A
 * restore starts QEMU anew from the save image, and QEMU reads its fw_cfg files at start, not
 * from the image: the file now holds the material of the fresh identity, padded to the same size
 * (the guest kernel sized the entry at boot), and every read of the sysfs `raw` file goes to the
 * device. Once the file parses as material it is copied to the agent's --bootstrap-token-file
 * (0600), where enrollment reads (and afterwards deletes) it.
 *
 * The guest's clock resumes at the time of the save; its RTC follows the host. As root the agent
 * then sets the system clock from the RTC (`busybox hwclock -s -u`), so TLS (the server certificate's
 * validity, the token's expiry) and everything after see the present time.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { BOOTSTRAP_MATERIAL_SCHEMA } from '../wire/bootstrap.js';
import { buildCsrPem } from './csr.js';
import { writeAtomic } from './enroll.js';

/**
 * Between two reads of the wait file, ms. Short: a restored guest sees its material at the next
 * read, and a waiting guest is saved within seconds (a saved one does not poll).
 */
export const BOOTSTRAP_WAIT_POLL_MS = 50;

export interface BootstrapWaitOptions {
  /** The file that will hold the material (read-only, fixed size, padded with spaces). */
  readonly waitFile: string;
  /** Where the material is copied to (0600; the agent's --bootstrap-token-file). */
  readonly tokenFile: string;
  readonly log: Pick<Logger, 'info' | 'warn'>;
  readonly signal?: AbortSignal;
  /** Default BOOTSTRAP_WAIT_POLL_MS. */
  readonly pollMs?: number;
  /** Set the system clock from the RTC once the material came. Default: when running as root. */
  readonly syncClock?: boolean;
}

/** The material in `text` (trailing padding ignored), or null while it is a placeholder or unreadable. */
export function materialText(text: string): string | null {
  const t = text.replace(/\0+$/, '').trim();
  if (t === '' || !t.startsWith('{')) return null;
  try {
    const m = JSON.parse(t) as { schema_version?: unknown; token?: unknown };
    return m.schema_version === BOOTSTRAP_MATERIAL_SCHEMA && typeof m.token === 'string' ? t : null;
  } catch {
    return null;
  }
}

/**
 * Resolves once the wait file held material and it was copied to the token file (false when the
 * signal stopped the wait first).
 */
export async function waitForBootstrapMaterial(o: BootstrapWaitOptions): Promise<boolean> {
  const pollMs = o.pollMs ?? BOOTSTRAP_WAIT_POLL_MS;
  warmEnrollment();
  o.log.info({ file: o.waitFile }, 'waiting for bootstrap material');
  let lastError = '';
  for (;;) {
    if (o.signal?.aborted === true) return false;
    let text = '';
    try {
      text = await readFile(o.waitFile, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      if (code !== lastError) o.log.warn({ file: o.waitFile, code }, 'the bootstrap wait file cannot be read yet');
      lastError = code;
    }
    const material = materialText(text);
    if (material !== null) {
      if (o.syncClock ?? process.getuid?.() === 0) await syncClockFromRtc(o.log);
      await mkdir(dirname(o.tokenFile), { recursive: true, mode: 0o700 });
      await writeAtomic(o.tokenFile, `${material}\n`, 0o600);
      o.log.info('bootstrap material arrived');
      return true;
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/**
 * Runs the enrollment's key and CSR code once with a throwaway key (dropped at once, never
 * written or sent), so the guest saved while waiting holds that code compiled: after the restore
 * it runs warm.
 */
function warmEnrollment(): void {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  buildCsrPem(privateKey, 'agent-warm-up');
}

/** `busybox hwclock -s -u` (best effort: logged, never fatal). */
function syncClockFromRtc(log: Pick<Logger, 'info' | 'warn'>): Promise<void> {
  const before = Date.now();
  const mono = performance.now();
  return new Promise((resolve) => {
    // The minimal image's busybox (its /bin holds the applets; the agent's wait mode runs only there).
    execFile('busybox', ['hwclock', '-s', '-u'], { timeout: 5000 }, (err) => {
      if (err !== null) log.warn({ err: err.message }, 'could not set the clock from the RTC');
      // How far the clock moved (the time the guest spent saved, to the RTC's whole second).
      else log.info({ movedMs: Math.round(Date.now() - before - (performance.now() - mono)) }, 'clock set from the RTC');
      resolve();
    });
  });
}
