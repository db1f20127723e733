/**
 * The files the `debian` image adds to the debootstrap root (build-debian.ts writes them):
 *
 * - sandbox-agent.service: when sandboxd hands the VM its identity through QEMU fw_cfg (files
 *   opt/sandboxd/{agent.env,ca.pem,agent.pem,agent-key.pem}, the same as the minimal image's
 *   /init reads), its root ExecStartPre (fw-cfg-setup) loads qemu_fw_cfg, copies the settings and
 *   certificates to /run (tmpfs: the key never lands on the disk), sets the hostname and the
 *   static address, and the agent runs as the `agent` user, restarted unless it exits 0 or 2; the
 *   VM's loadout material (fw_cfg loadout.json) goes to the agent's --loadout-file, which applies it.
 * - cloud-init stays installed for seed-based use (NoCloud only: no network metadata probing,
 *   which stalls boot where no metadata service exists), and is skipped, with systemd-networkd
 *   and its wait-online, when the fw_cfg identity is present: one owner per boot.
 * - sandboxd-sshd.service (guest-ssh.ts): openssh-server is installed with no host key and no
 *   authorized key, Debian's ssh.service is disabled, and sshd runs only when sandboxd hands the
 *   VM an SSH CA through fw_cfg (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH).
 * - initramfs-tools settings (MODULES=list: `dep` cannot see the target machine from a chroot)
 *   so virtio, ext4 and qemu_fw_cfg are in Debian's initramfs and loaded before the root mounts.
 */
import { FW_CFG_PREFIX, LOADOUT_FW_CFG_NAME } from './guest-init.js';
import { FW_CFG_SSH_SETUP, FW_CFG_SSH_SETUP_PATH, SANDBOXD_SSHD_UNIT, SSHD_UNIT_NAME } from './guest-ssh.js';

/** A file written into the root, path absolute inside it. */
export interface GuestFile {
  path: string;
  mode: number;
  content: string;
}

/** The unprivileged user the agent (and so every task) runs as; the spec's default guest user. */
export const DEBIAN_GUEST_USER = 'agent';
/** Where the image keeps the compiled agent (node_modules beside it). */
export const DEBIAN_AGENT_DIR = '/opt/sandbox-agent';
/** The host's node binary inside the image (on every PATH). */
export const DEBIAN_NODE_PATH = '/usr/local/bin/node';
/** Runtime copy of the fw_cfg settings and certificates (tmpfs). */
export const DEBIAN_RUN_DIR = '/run/sandbox-agent';
/** The file whose presence means "sandboxd provisions this boot through fw_cfg". */
export const FW_CFG_MARKER = `/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}/agent.env/raw`;
/** Modules initramfs-tools puts in the initrd and loads before mounting the root (dependencies come along). */
export const INITRAMFS_MODULES: readonly string[] = ['virtio_pci', 'virtio_blk', 'virtio_net', 'ext4', 'qemu_fw_cfg'];
/** Units that only cost boot time or disk writes in a short-lived VM. */
export const DISABLED_UNITS: readonly string[] = [
  'apt-daily.timer',
  'apt-daily-upgrade.timer',
  'dpkg-db-backup.timer',
  'e2scrub_all.timer',
  'fstrim.timer',
  'e2scrub_reap.service',
  'getty@tty1.service',
  // Debian's sshd (enabled by openssh-server's postinst): sandboxd-sshd.service runs sshd, and only with an SSH CA.
  'ssh.service',
];
/**
 * Units masked: kernel features a sandbox VM does not use (binfmt_misc, pstore, DRM, EFI,
 * device-mapper and loop preloads, debug/tracing mounts) and the generator of network units from
 * the kernel command line. Each costs 1-2 s of a single TCG vCPU before sysinit.target.
 */
export const MASKED_UNITS: readonly string[] = [
  'systemd-binfmt.service',
  'proc-sys-fs-binfmt_misc.automount',
  'systemd-pstore.service',
  'systemd-network-generator.service',
  'modprobe@drm.service',
  'modprobe@efi_pstore.service',
  'modprobe@dm_mod.service',
  'modprobe@loop.service',
  'sys-kernel-debug.mount',
  'sys-kernel-tracing.mount',
];
/** Units enabled in the image (networkd renders cloud-init's network config when cloud-init runs). */
export const ENABLED_UNITS: readonly string[] = ['sandbox-agent.service', 'systemd-networkd.service', SSHD_UNIT_NAME];
/**
 * Units that get the fw_cfg skip condition: cloud-init's, and networkd with its socket and
 * wait-online (in fw_cfg mode fw-cfg-setup sets the address; the wait would last 2 min with no
 * managed link, and the socket would hit its trigger limit on every netlink change).
 */
export const SKIPPED_WITH_FW_CFG: readonly string[] = [
  'cloud-init-local.service',
  'cloud-init.service',
  'cloud-config.service',
  'cloud-final.service',
  'systemd-networkd.service',
  'systemd-networkd.socket',
  'systemd-networkd-wait-online.service',
];

/**
 * The guest's reading of agent.env (stdin → stdout, and the same values as shell variables): only
 * SBX_NAME=value lines with a plain value pass (sandboxd checks the values when it writes them,
 * src/vms/fw-cfg.ts agentEnv; this keeps a bad file from injecting anything into the agent's
 * command line or this script). The variables the script uses start empty.
 */
export const ENV_FILTER = `SBX_AGENT_ID='' SBX_INSTANCE_ID='' SBX_SERVER='' SBX_HOSTNAME='' SBX_IP='' SBX_GW=''
while IFS= read -r line; do
  k=\${line%%=*}; v=\${line#*=}
  [ "$k" = "$line" ] && continue
  case "$k" in SBX_*) ;; *) continue ;; esac
  case "$k" in *[!A-Z_]*) continue ;; esac
  case "$v" in ''|*[!A-Za-z0-9_.:/@+-]*) continue ;; esac
  printf '%s=%s\\n' "$k" "$v"
  eval "$k=\\$v"
done`;

/**
 * ExecStartPre of sandbox-agent.service (runs as root: `+`). Shell builtins wherever possible:
 * under TCG every extra process costs about 0.1 s of boot.
 */
export const FW_CFG_SETUP = `#!/bin/sh
# sandbox-agent.service, ExecStartPre as root: settings, certificates, hostname and address from
# the fw_cfg files sandboxd wrote for this VM. Output goes to the journal and the serial console.
set -eu
FW=/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}
RUN=${DEBIAN_RUN_DIR}
log() { echo "sandboxd-guest: $*" >&2; }
# Loaded by the initramfs and modules-load.d already; this covers a hand-made initrd.
[ -d /sys/firmware/qemu_fw_cfg ] || modprobe qemu_fw_cfg
i=0
until [ -r "$FW/agent.env/raw" ] && [ -e /sys/class/net/eth0 ]; do
  i=$((i + 1))
  if [ "$i" -gt 100 ]; then log "no fw_cfg file ${FW_CFG_PREFIX}/agent.env or no eth0"; exit 1; fi
  sleep 0.1
done
# The folder stays traversable (0755); the certificates' folder and files are the agent's only.
[ -d "$RUN/certs" ] || mkdir -p -m 0700 "$RUN/certs"
umask 077
# One bulk read per fw_cfg file (the shell's read builtin would fetch it byte by byte).
for f in ca.pem agent.pem agent-key.pem; do cat "$FW/$f/raw" > "$RUN/certs/$f"; done
cat "$FW/agent.env/raw" > "$RUN/agent.env.raw"
${ENV_FILTER} < "$RUN/agent.env.raw" > "$RUN/agent.env"
rm -f "$RUN/agent.env.raw"
# The VM's loadout material (empty without one; absent on a domain older than the file).
cat "$FW/${LOADOUT_FW_CFG_NAME}/raw" > "$RUN/loadout.json" 2>/dev/null || : > "$RUN/loadout.json"
chown ${DEBIAN_GUEST_USER}:${DEBIAN_GUEST_USER} "$RUN/loadout.json"
chown -R ${DEBIAN_GUEST_USER}:${DEBIAN_GUEST_USER} "$RUN/certs"
umask 022
[ -d /home/${DEBIAN_GUEST_USER}/workspace ] || install -d -o ${DEBIAN_GUEST_USER} -g ${DEBIAN_GUEST_USER} /home/${DEBIAN_GUEST_USER}/workspace
# The agent share: virtio-9p devices (virtio id 9) when the VM has agentshare; its inbox and
# outbox go into the workspace (mounted once per boot: a unit restart finds them mounted).
if grep -qx 0x0009 /sys/bus/virtio/devices/*/device 2>/dev/null; then
  modprobe 9pnet_virtio || log "no 9p in this kernel: the agent share is not mounted"
  for t in inbox outbox; do
    d=/home/${DEBIAN_GUEST_USER}/workspace/$t
    if mountpoint -q "$d"; then continue; fi
    [ -d "$d" ] || install -d -o ${DEBIAN_GUEST_USER} -g ${DEBIAN_GUEST_USER} "$d"
    if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "sbx-$t" "$d"; then
      chown ${DEBIAN_GUEST_USER}:${DEBIAN_GUEST_USER} "$d"
    else
      log "cannot mount sbx-$t"
    fi
  done
fi
if [ -n "$SBX_HOSTNAME" ]; then
  echo "$SBX_HOSTNAME" > /proc/sys/kernel/hostname
  echo "$SBX_HOSTNAME" > /etc/hostname
  printf '127.0.0.1 localhost\\n::1 localhost ip6-localhost ip6-loopback\\n127.0.1.1 %s\\n' "$SBX_HOSTNAME" > /etc/hosts
fi
{
  echo "link set lo up"
  echo "link set eth0 up"
  if [ -n "$SBX_IP" ]; then echo "addr replace $SBX_IP dev eth0"; fi
  if [ -n "$SBX_GW" ]; then echo "route replace default via $SBX_GW dev eth0"; fi
} | ip -batch -
log "starting sandbox-agent $SBX_AGENT_ID ($SBX_INSTANCE_ID) at $SBX_IP, server $SBX_SERVER"
`;

/** The agent's unit. `${X}` expands to one argument (an unset value gives '', which the agent refuses with exit 2). */
export const SANDBOX_AGENT_UNIT = `[Unit]
Description=sandbox-agent (identity and settings from sandboxd through QEMU fw_cfg)
# Without the fw_cfg files this boot belongs to cloud-init (a seed may install its own unit of
# this name in /etc, which then replaces this one).
ConditionPathExists=${FW_CFG_MARKER}
After=systemd-modules-load.service local-fs.target
StartLimitIntervalSec=0

[Service]
Type=simple
User=${DEBIAN_GUEST_USER}
Group=${DEBIAN_GUEST_USER}
ExecStartPre=+/usr/local/lib/sandboxd/fw-cfg-setup
# Loaded for each command: missing for ExecStartPre (which writes it), present for ExecStart.
EnvironmentFile=-${DEBIAN_RUN_DIR}/agent.env
Environment=HOME=/home/${DEBIAN_GUEST_USER} LANG=C.UTF-8
WorkingDirectory=/home/${DEBIAN_GUEST_USER}
ExecStart=${DEBIAN_NODE_PATH} ${DEBIAN_AGENT_DIR}/src/bin/sandbox-agent.js --server \${SBX_SERVER} --certs ${DEBIAN_RUN_DIR}/certs --agent-id \${SBX_AGENT_ID} --instance-id \${SBX_INSTANCE_ID} --profile \${SBX_PROFILE} --work-dir /home/${DEBIAN_GUEST_USER}/workspace --loadout-file ${DEBIAN_RUN_DIR}/loadout.json
# Exit 2 is a bad setting: it would only fail again.
Restart=on-failure
RestartPreventExitStatus=2
RestartSec=1
# Only the agent is signalled on stop or restart: it ends its commands' process groups itself,
# and the managed tmux server must outlive an agent restart (the agent re-attaches its sessions).
KillMode=process
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
`;

/** Drop-in for SKIPPED_WITH_FW_CFG. */
export const SKIP_WITH_FW_CFG = `# sandboxd: the fw_cfg identity is present, so sandbox-agent.service provisions this boot.
[Unit]
ConditionPathExists=!${FW_CFG_MARKER}
`;

/**
 * cloud-init: local seeds only, so a boot without any datasource does not wait for a metadata
 * service; and no module that fails on this image (no locales package), nor any that makes SSH
 * host keys (sshd is sandboxd-sshd.service's, which makes its own key on first boot).
 */
export const CLOUD_CFG = `# sandboxd: NoCloud only (a cidata disk or seedfrom=); None keeps a seedless boot quick.
datasource_list: [ NoCloud, None ]
# glibc's C.UTF-8 is the only locale (/etc/default/locale); there is no locale-gen to make others.
locale: false
# The hostname resolves (sudo looks it up).
manage_etc_hosts: localhost
# sshd runs only with sandboxd's SSH CA (sandboxd-sshd.service makes the host key): none here.
ssh_genkeytypes: []
ssh_deletekeys: false
`;

/** Root on the first virtio disk (the per-VM overlay of disk.ext4). */
export const FSTAB = `# <file system> <mount point> <type> <options> <dump> <pass>
/dev/vda / ext4 rw,noatime,errors=remount-ro 0 1
`;

/** Wrapper with the cloud-init seed's path (src/vms/cloud-init.ts GUEST_AGENT_BIN). */
export const AGENT_WRAPPER = `#!/bin/sh
exec ${DEBIAN_NODE_PATH} ${DEBIAN_AGENT_DIR}/src/bin/sandbox-agent.js "$@"
`;

/** Every file the recipe adds (its text is part of the image's cache key). */
export function debianGuestFiles(): GuestFile[] {
  const files: GuestFile[] = [
    { path: '/usr/local/lib/sandboxd/fw-cfg-setup', mode: 0o755, content: FW_CFG_SETUP },
    { path: '/usr/lib/systemd/system/sandbox-agent.service', mode: 0o644, content: SANDBOX_AGENT_UNIT },
    { path: FW_CFG_SSH_SETUP_PATH, mode: 0o755, content: FW_CFG_SSH_SETUP },
    { path: `/usr/lib/systemd/system/${SSHD_UNIT_NAME}`, mode: 0o644, content: SANDBOXD_SSHD_UNIT },
    { path: '/usr/local/bin/sandbox-agent', mode: 0o755, content: AGENT_WRAPPER },
    { path: '/etc/cloud/cloud.cfg.d/90_sandboxd.cfg', mode: 0o644, content: CLOUD_CFG },
    { path: '/etc/modules-load.d/sandboxd.conf', mode: 0o644, content: 'qemu_fw_cfg\n' },
    { path: '/etc/fstab', mode: 0o644, content: FSTAB },
    { path: '/etc/hostname', mode: 0o644, content: 'sandbox\n' },
    { path: '/etc/default/locale', mode: 0o644, content: 'LANG=C.UTF-8\n' },
    { path: '/etc/hosts', mode: 0o644, content: '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n127.0.1.1 sandbox\n' },
    // Tasks may install what they need; the VM, not the user, is the isolation boundary.
    { path: `/etc/sudoers.d/${DEBIAN_GUEST_USER}`, mode: 0o440, content: `${DEBIAN_GUEST_USER} ALL=(ALL) NOPASSWD:ALL\n` },
  ];
  for (const u of SKIPPED_WITH_FW_CFG)
    files.push({ path: `/etc/systemd/system/${u}.d/sandboxd.conf`, mode: 0o644, content: SKIP_WITH_FW_CFG });
  return files;
}

/** Files written before the packages are installed (initramfs-tools reads them when it builds the initrd). */
export function initramfsFiles(): GuestFile[] {
  return [
    {
      path: '/etc/initramfs-tools/conf.d/sandboxd.conf',
      mode: 0o644,
      content: '# sandboxd: listed modules only (MODULES=dep would inspect the build host)\nMODULES=list\nCOMPRESS=zstd\n',
    },
    { path: '/etc/initramfs-tools/modules', mode: 0o644, content: `${INITRAMFS_MODULES.join('\n')}\n` },
  ];
}
