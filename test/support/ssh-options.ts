/**
 * Options that make the real `ssh`/`scp` client run unattended in tests: no user or system
 * config, no prompts, and no known-hosts file (every test's sshd has a fresh host key).
 */
export const kBatchSsh: readonly string[] = [
  '-F',
  '/dev/null',
  '-o',
  'BatchMode=yes',
  '-o',
  'StrictHostKeyChecking=no',
  '-o',
  'UserKnownHostsFile=/dev/null',
];
