/**
 * The `debian` image's sshd for SSH leases (spec 4.14 "Guest provisioning"; README "SSH
 * connector"). The image has openssh-server but no host key and no authorized key, and Debian's
 * own ssh.service is disabled: sshd runs only as sandboxd-sshd.service, and only when sandboxd
 * hands the VM an SSH CA through fw_cfg (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH set when the VM
 * was created):
 *
 *   opt/sandboxd/ssh-ca.pub        the CA public key, one line `<type> <base64>` (no comment)
 *   opt/sandboxd/ssh-user          SVC_GATEWAY_SSH_AUTHORIZED_USER, one line
 *   opt/sandboxd/ssh-principals    SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS, one per line
 *
 * The unit's ExecCondition (`fw-cfg-ssh check`) skips it, without failing, when those files are
 * absent or the CA is empty (a VM re-provisioned after the variable was unset). Its ExecStartPre
 * (`fw-cfg-ssh`, root) checks every value (a bad one: exit 2, no restart), writes the CA key, the
 * principals file and sshd_config to GUEST_SSH_RUN_DIR (tmpfs: nothing of sandboxd's reaches the
 * disk), creates the user when missing, and makes the VM's ed25519 host key on its first boot
 * (kept on the VM's overlay, so the host key stays the same across reboots). sshd then trusts
 * only certificates of that CA for those principals: `AuthorizedKeysFile none`, no passwords.
 */
import { FW_CFG_PREFIX } from './guest-init.js';

/** fw_cfg file names (below FW_CFG_PREFIX) of the SSH settings, in the order sandboxd writes them. */
export const SSH_FW_CFG_NAMES = ['ssh-ca.pub', 'ssh-user', 'ssh-principals'] as const;
/** Where the guest keeps the CA key, the principals and sshd_config (tmpfs). */
export const GUEST_SSH_RUN_DIR = '/run/sandboxd-sshd';
/** The guest's host key folder (the key is made at first boot, never in the image). */
export const GUEST_SSH_ETC_DIR = '/etc/ssh';
/** The setup script's path in the image. */
export const FW_CFG_SSH_SETUP_PATH = '/usr/local/lib/sandboxd/fw-cfg-ssh';
/** The unit that runs the guest's sshd. */
export const SSHD_UNIT_NAME = 'sandboxd-sshd.service';
/** The fw_cfg file whose presence means "this VM was provisioned with SSH". */
export const SSH_FW_CFG_MARKER = `/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}/ssh-ca.pub/raw`;

/**
 * The guest's sshd_config, one directive a line. The arguments are placeholders the script
 * expands (`$user`, `$RUN`, `$ETC`) or, in tests, real values.
 */
export function guestSshdConfig(user: string, runDir: string = GUEST_SSH_RUN_DIR, etcDir: string = GUEST_SSH_ETC_DIR): string {
  return [
    '# sandboxd: written at boot from the fw_cfg SSH settings (README "SSH connector"). Only',
    "# certificates of sandboxd's SSH CA for an authorized principal log in.",
    'Port 22',
    `HostKey ${etcDir}/ssh_host_ed25519_key`,
    `TrustedUserCAKeys ${runDir}/ca.pub`,
    `AuthorizedPrincipalsFile ${runDir}/principals/%u`,
    'AuthorizedKeysFile none',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'HostbasedAuthentication no',
    'PermitEmptyPasswords no',
    'PermitRootLogin prohibit-password',
    `AllowUsers ${user}`,
    // PAM for the session (logind, limits); it also lets a user without a password (locked, `!`) in by certificate.
    'UsePAM yes',
    'PrintMotd no',
    'AcceptEnv LANG LC_*',
    'Subsystem sftp internal-sftp',
    'LogLevel INFO',
    '',
  ].join('\n');
}

/**
 * The setup script (`fw-cfg-ssh check` for ExecCondition, `fw-cfg-ssh` for ExecStartPre, root).
 * SANDBOXD_SSH_FW / _RUN / _ETC move its folders (tests run it against plain files); systemd
 * starts it with none of them set.
 */
export const FW_CFG_SSH_SETUP = `#!/bin/sh
# ${SSHD_UNIT_NAME}: the SSH CA public key, the authorized user and its principals from the
# fw_cfg files sandboxd wrote for this VM. "check": exit 1 (the unit is skipped) without them.
set -eu
FW=\${SANDBOXD_SSH_FW:-/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}}
RUN=\${SANDBOXD_SSH_RUN:-${GUEST_SSH_RUN_DIR}}
ETC=\${SANDBOXD_SSH_ETC:-${GUEST_SSH_ETC_DIR}}
log() { echo "sandboxd-guest: $*" >&2; }
bad() { log "sshd stays off: $*"; exit 2; }
# One bulk read per fw_cfg file (the shell's read builtin would fetch it byte by byte).
ca=$(cat "$FW/ssh-ca.pub/raw" 2>/dev/null || true)
if [ "\${1:-}" = check ]; then
  if [ -z "$ca" ]; then log "no SSH CA in fw_cfg: sshd stays off"; exit 1; fi
  exit 0
fi
user=$(cat "$FW/ssh-user/raw") || bad "no fw_cfg file ssh-user"
principals=$(cat "$FW/ssh-principals/raw") || bad "no fw_cfg file ssh-principals"
# The CA: exactly "<type> <base64>", one line (sandboxd drops the comment).
ktype=\${ca%% *}
kbody=\${ca#* }
[ "$ktype $kbody" = "$ca" ] || bad "the SSH CA key is not one public key line"
case "$ktype" in ''|*[!A-Za-z0-9@.-]*) bad "the SSH CA key is not one public key line" ;; esac
case "$kbody" in ''|*[!A-Za-z0-9+/=]*) bad "the SSH CA key is not one public key line" ;; esac
case "$user" in
  ''|[!A-Za-z_]*|*[!A-Za-z0-9_.-]*) bad "the SSH user is not a user name" ;;
esac
[ \${#user} -le 32 ] || bad "the SSH user name is longer than 32 characters"
[ -n "$principals" ] || bad "no SSH principals"
umask 022
mkdir -p "$RUN/principals"
chmod 0755 "$RUN" "$RUN/principals"
rm -f "$RUN/principals/"*
printf '%s\\n' "$ca" > "$RUN/ca.pub"
ssh-keygen -l -f "$RUN/ca.pub" >/dev/null 2>&1 || bad "the SSH CA key is not a public key ssh-keygen reads"
set -f
n=0
for p in $principals; do
  case "$p" in
    *[!A-Za-z0-9_.@+-]*) bad "an SSH principal has characters sshd would misread" ;;
  esac
  n=$((n + 1))
  [ \${#p} -le 128 ] || bad "an SSH principal is longer than 128 characters"
  printf '%s\\n' "$p"
done > "$RUN/principals/$user.tmp"
set +f
[ "$n" -gt 0 ] || bad "no SSH principals"
mv "$RUN/principals/$user.tmp" "$RUN/principals/$user"
if ! id -u "$user" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash --user-group "$user"
  log "created the SSH user $user"
fi
if [ ! -s "$ETC/ssh_host_ed25519_key" ]; then
  rm -f "$ETC/ssh_host_ed25519_key" "$ETC/ssh_host_ed25519_key.pub"
  mkdir -p "$ETC"
  ssh-keygen -q -t ed25519 -N '' -C '' -f "$ETC/ssh_host_ed25519_key"
  log "made this VM's SSH host key: $(ssh-keygen -l -f "$ETC/ssh_host_ed25519_key.pub")"
fi
cat > "$RUN/sshd_config.tmp" <<EOF
${guestSshdConfig('$user', '$RUN', '$ETC')}EOF
mv "$RUN/sshd_config.tmp" "$RUN/sshd_config"
log "sshd: certificates of the SSH CA for user $user, principals $(tr '\\n' ' ' < "$RUN/principals/$user")"
`;

/** The guest sshd's unit (enabled in the image; skipped unless the fw_cfg SSH settings are there). */
export const SANDBOXD_SSHD_UNIT = `[Unit]
Description=OpenSSH server for sandboxd SSH leases (trusts only the SSH CA from fw_cfg)
Documentation=man:sshd(8) man:sshd_config(5)
ConditionPathExists=${SSH_FW_CFG_MARKER}
After=systemd-modules-load.service local-fs.target network.target

[Service]
Type=notify
ExecCondition=${FW_CFG_SSH_SETUP_PATH} check
ExecStartPre=${FW_CFG_SSH_SETUP_PATH}
ExecStartPre=/usr/sbin/sshd -t -f ${GUEST_SSH_RUN_DIR}/sshd_config
ExecStart=/usr/sbin/sshd -D -f ${GUEST_SSH_RUN_DIR}/sshd_config
ExecReload=/usr/sbin/sshd -t -f ${GUEST_SSH_RUN_DIR}/sshd_config
ExecReload=/bin/kill -HUP $MAINPID
# Sessions outlive an sshd restart, as with Debian's ssh.service.
KillMode=process
Restart=on-failure
RestartSec=2
# 2: a bad fw_cfg setting; 255: sshd refused its configuration. Either would only fail again.
RestartPreventExitStatus=2 255
RuntimeDirectory=sshd
RuntimeDirectoryMode=0755
StandardError=journal+console

[Install]
WantedBy=multi-user.target
`;
