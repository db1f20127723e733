/**
 * The busybox /init of the minimal guest image (PID 1 inside the initramfs).
 *
 * Boot: mount proc/sys/devtmpfs, load the virtio, ext4 and fw_cfg modules in dependency order
 * (busybox insmod resolves nothing), read the VM's settings and mTLS files from fw_cfg
 * (/sys/firmware/qemu_fw_cfg/by_name/opt/sandboxd/...; sandboxd writes them per VM, never on a
 * command line; a VM created with `enrollment: deferred` has SBX_ENROLLMENT=deferred and no
 * certificate: its agent waits for bootstrap material in fw_cfg bootstrap.json instead), configure eth0 statically, mount the image disk (/dev/vda: node, the agent,
 * tmux, git) at /opt/sbx and run sandbox-agent (with the VM's loadout material from fw_cfg), restarting it unless it exits 0 or 2 (a bad
 * setting would only fail again). Then the guest powers off. Everything goes to the serial console.
 */

/** Modules loaded in this order (each one's dependencies come before it). */
export const GUEST_MODULES: readonly string[] = [
  'virtio_ring',
  'virtio',
  'virtio_pci_legacy_dev',
  'virtio_pci_modern_dev',
  'virtio_pci',
  // The VM's virtio RNG (<rng model='virtio'>): seeds the kernel's CRNG at once. Without it node's
  // first getrandom() waits for jitter entropy, which under TCG takes seconds.
  'virtio-rng',
  'failover',
  'net_failover',
  'virtio_net',
  'virtio_console',
  'virtio_blk',
  'crc16',
  'crc32c_generic',
  'mbcache',
  'jbd2',
  'ext4',
  'qemu_fw_cfg',
];

/**
 * The agent share's modules (README "Scoped storage"), in dependency order: in the initramfs, but
 * loaded only when the VM has virtio-9p devices (its `agentshare`), so a VM without pays nothing.
 */
export const SHARE_MODULES: readonly string[] = ['9pnet', '9pnet_virtio', 'netfs', 'fscache', '9p'];

/** Where a minimal guest mounts the two shares (the agent's work dir, like a local agent's links). */
export const GUEST_WORK_DIR = '/opt/sbx/work';

/** fw_cfg folder the guest reads (names passed to QEMU are `opt/sandboxd/<file>`). */
export const FW_CFG_PREFIX = 'opt/sandboxd';
/** The fw_cfg file of the VM's loadout material (src/vms/fw-cfg.ts writes it; empty without one). */
export const LOADOUT_FW_CFG_NAME = 'loadout.json';

/**
 * Node options of the minimal guest's agent. `--use-openssl-ca`: a TLS context given its own CA
 * (every connection the agent makes: sandboxd's mTLS, enrollment) still makes Node parse its
 * bundled Mozilla root store once per process, about 22 ms natively and 0.3 s under TCG, most of
 * the agent's time before it first dials (native-bench README, vm-real). With this option the
 * default store is OpenSSL's, empty in this image, so nothing is parsed; the agent trusts only the
 * CAs it is handed, as before. It is a Node option, not a V8 flag: the image's code cache still
 * matches.
 */
export const AGENT_NODE_OPTIONS: readonly string[] = ['--use-openssl-ca'];

/** The /init script. Settings arrive as SBX_* lines in agent.env (values validated by the writer). */
export const GUEST_INIT = `#!/bin/sh
export PATH=/bin:/sbin:/opt/sbx/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /run /tmp /opt/sbx /lib64
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
exec </dev/console >/dev/console 2>&1
up() { read -r u _ </proc/uptime; echo "up=$u"; }
echo "sbx-init: boot $(up)"
for m in $(cat /etc/modules.order); do insmod /lib/modules/$m.ko || echo "sbx-init: insmod $m failed"; done
echo "sbx-init: modules $(up)"
FW=/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}
i=0
while [ ! -r $FW/agent.env/raw ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
if [ ! -r $FW/agent.env/raw ]; then echo "sbx-init: no ${FW_CFG_PREFIX}/agent.env in fw_cfg"; poweroff -f; fi
cat $FW/agent.env/raw > /run/agent.env
. /run/agent.env
umask 077
mkdir -p /run/sbx/certs
if [ "$SBX_ENROLLMENT" = deferred ]; then
  # No identity yet: the agent waits for bootstrap material in fw_cfg (a restored checkpoint's).
  set -- --bootstrap-token-file /run/sbx/bootstrap.json --bootstrap-wait $FW/bootstrap.json/raw
else
  for f in ca.pem agent.pem agent-key.pem; do cat $FW/$f/raw > /run/sbx/certs/$f; done
  set -- --agent-id "$SBX_AGENT_ID" --instance-id "$SBX_INSTANCE_ID"
fi
# The VM's loadout material (empty without one; absent on a domain older than the file): the agent applies it.
cat $FW/${LOADOUT_FW_CFG_NAME}/raw > /run/sbx/loadout.json 2>/dev/null || : > /run/sbx/loadout.json
umask 022
hostname "$SBX_HOSTNAME"
ip link set lo up
ip link set eth0 up
ip addr add "$SBX_IP" dev eth0
ip route add default via "$SBX_GW"
mount -t ext4 -o noatime /dev/vda /opt/sbx || { echo "sbx-init: cannot mount /dev/vda"; poweroff -f; }
ln -sf /opt/sbx/lib/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2
export LD_LIBRARY_PATH=/opt/sbx/lib HOME=/root TERMINFO_DIRS=/opt/sbx/terminfo GIT_EXEC_PATH=/opt/sbx/bin LOCPATH=/opt/sbx/locale LANG=C.UTF-8
mkdir -p ${GUEST_WORK_DIR} /root
# The agent share: virtio-9p devices (virtio id 9) are there when the VM has agentshare.
mount_shares() {
  for t in inbox outbox; do
    mkdir -p ${GUEST_WORK_DIR}/$t
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 sbx-$t ${GUEST_WORK_DIR}/$t || echo "sbx-init: cannot mount sbx-$t"
  done
  echo "sbx-init: shares $(up)"
}
if grep -qx 0x0009 /sys/bus/virtio/devices/*/device 2>/dev/null; then
  for m in ${SHARE_MODULES.join(' ')}; do insmod /lib/modules/$m.ko || echo "sbx-init: insmod $m failed"; done
  if [ "$SBX_ENROLLMENT" = deferred ]; then
    # QEMU cannot save a domain while a 9p share is mounted (a migration blocker): a checkpoint's
    # guest loads the modules now and mounts once a restore brought its material.
    ( while ! grep -q '"token"' $FW/bootstrap.json/raw 2>/dev/null; do sleep 0.1; done; mount_shares ) &
  else
    mount_shares
  fi
fi
echo "sbx-init: starting sandbox-agent for $SBX_INSTANCE_ID $(up)"
while :; do
  node ${AGENT_NODE_OPTIONS.join(' ')} /opt/sbx/agent/src/bin/sandbox-agent.js --server "$SBX_SERVER" --certs /run/sbx/certs "$@" \\
    --profile "$SBX_PROFILE" --work-dir ${GUEST_WORK_DIR} --loadout-file /run/sbx/loadout.json
  rc=$?
  echo "sbx-init: sandbox-agent exited $rc"
  if [ $rc -eq 0 ] || [ $rc -eq 2 ]; then break; fi
  sleep 1
done
sync
poweroff -f
`;
