/**
 * Checks done before starting a command, so that "cannot start" is reported as exit_code -1 with
 * a reason instead of whatever the child prints: node-pty forks before exec, so a missing
 * program or directory would otherwise look like a program that printed an error and exited 1.
 * Also resolves run_as users.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** Why the command cannot start, or undefined when it can. */
export async function checkSpawnable(command: string, cwd: string, pathEnv: string | undefined): Promise<string | undefined> {
  if (command === '') return 'command is empty';
  if (command.includes('\0')) return 'command contains NUL';
  try {
    const st = await stat(cwd);
    if (!st.isDirectory()) return `working_dir ${cwd} is not a directory`;
  } catch {
    return `working_dir ${cwd} does not exist`;
  }
  if (command.includes('/')) {
    const p = isAbsolute(command) ? command : resolve(cwd, command);
    return (await isExecutableFile(p)) ? undefined : `${command}: no such executable file`;
  }
  for (const dir of (pathEnv ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter)) {
    if (dir === '') continue;
    if (await isExecutableFile(join(isAbsolute(dir) ? dir : resolve(cwd, dir), command))) return undefined;
  }
  return `${command}: command not found in PATH`;
}

async function isExecutableFile(p: string): Promise<boolean> {
  try {
    const st = await stat(p);
    if (!st.isFile()) return false;
    await access(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface ResolvedUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
  readonly shell: string;
}

function parsePasswdLine(line: string): ResolvedUser | undefined {
  const f = line.split(':');
  if (f.length < 7) return undefined;
  const uid = Number(f[2]);
  const gid = Number(f[3]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) return undefined;
  return { name: f[0] ?? '', uid, gid, home: f[5] ?? '/', shell: f[6] ?? '/bin/sh' };
}

/**
 * Looks a user up by name or numeric uid: `getent passwd` (sees NSS sources such as LDAP), then
 * /etc/passwd. Rejects with a reason when the user does not exist.
 */
export async function resolveUser(nameOrUid: string): Promise<ResolvedUser> {
  if (!/^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}\$?$/.test(nameOrUid)) throw new Error(`run_as "${nameOrUid}" is not a valid user name`);
  const viaGetent = await new Promise<string | undefined>((res) => {
    execFile('getent', ['passwd', nameOrUid], { timeout: 5000 }, (err, stdout) => res(err ? undefined : stdout));
  });
  const fromGetent = viaGetent
    ?.split('\n')
    .map(parsePasswdLine)
    .find((u) => u !== undefined);
  if (fromGetent) return fromGetent;
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const hit = passwd
    .split('\n')
    .map(parsePasswdLine)
    .find((u) => u !== undefined && (u.name === nameOrUid || String(u.uid) === nameOrUid));
  if (!hit) throw new Error(`run_as user "${nameOrUid}" does not exist`);
  return hit;
}
