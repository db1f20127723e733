/**
 * Domain XML for the two kinds of host: libvirt's test driver (`<domain type='test'>`, no
 * devices) and qemu (`type='qemu'` under TCG or `'kvm'`): virtio disks (a qcow2 overlay first),
 * one virtio NIC on a named network with a MAC derived from the VM name, optional virtio-vsock,
 * serial console to a log file, optional direct kernel boot and fw_cfg files, pvpanic with
 * on_crash='preserve' (so a guest panic shows as state crashed), and a metadata element carrying
 * sandboxd's profile and labels. Every value is validated, then escaped.
 */
import { createHash, randomUUID } from 'node:crypto';
import { SvcError } from '../../core/errors.js';
import type { DomainMetadata, DomainSpec, QemuDomainSpec } from '../port.js';

/** Namespace of our `<metadata>` element (libvirt keys custom metadata by namespace URI). */
export const METADATA_NS = 'urn:sandboxd:vm:1';
const NS_PREFIX = 'sbx';

const NAME_RE = /^[A-Za-z0-9_.+-]{1,64}$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;
const NETWORK_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const LABEL_KEY_RE = /^[A-Za-z0-9_./-]{1,63}$/;
const FWCFG_NAME_RE = /^opt\/[A-Za-z0-9_./-]{1,50}$/;
const MAX_TEXT = 512;
const MAX_LABELS = 32;
const MAX_DISKS = 16;

/** `52:54:00:xx:xx:xx` from the VM name: stable across re-creation, in QEMU's locally administered range. */
export function macFromName(name: string): string {
  const h = createHash('sha256').update(`sandboxd-mac:${name}`).digest();
  const tail = [h[0], h[1], h[2]].map((b) => (b ?? 0).toString(16).padStart(2, '0'));
  return `52:54:00:${tail.join(':')}`;
}

/** Escapes text or attribute content (both quote kinds, so either quoting is safe). */
export function escapeXml(value: string): string {
  return value.replace(/[&<>"']/g, (c) =>
    c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&apos;',
  );
}

/** Reverses escapeXml and numeric character references (for values read back from libvirt). */
export function unescapeXml(value: string): string {
  return value.replace(/&(#x[0-9a-f]+|#[0-9]+|lt|gt|amp|quot|apos);/gi, (_m, ent: string) => {
    const e = ent.toLowerCase();
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return ({ lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" } as Record<string, string>)[e] ?? '';
  });
}

/**
 * True when `value` has a character we refuse in a value: XML 1.0 forbids C0 controls other than
 * tab, LF and CR (we refuse those too: values are single-line), and U+FFFE/U+FFFF; DEL is refused
 * as well.
 */
export function hasControlChars(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c === 0x7f || c === 0xfffe || c === 0xffff) return true;
  }
  return false;
}

function invalid(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

function text(field: string, value: string, max = MAX_TEXT): string {
  if (value.length === 0 || value.length > max) throw invalid(`${field} must be 1-${max} characters`);
  if (hasControlChars(value)) throw invalid(`${field} contains a control character`);
  return escapeXml(value);
}

function path(field: string, value: string): string {
  if (!value.startsWith('/')) throw invalid(`${field} must be an absolute path`);
  return text(field, value, 4096);
}

function int(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw invalid(`${field} must be an integer in ${min}-${max}`);
  return value;
}

/** Checks a spec (names, ranges, paths, label keys); throws request.invalid. Returns the uuid to use. */
export function validateSpec(spec: DomainSpec): string {
  if (typeof spec.name !== 'string' || !NAME_RE.test(spec.name)) throw invalid('name must be 1-64 characters of A-Z a-z 0-9 _ . + -');
  const uuid = spec.uuid ?? randomUUID();
  if (!UUID_RE.test(uuid)) throw invalid('uuid must be a UUID');
  int('vcpus', spec.vcpus, 1, 256);
  int('memoryMiB', spec.memoryMiB, 16, 4 * 1024 * 1024);
  metadataXml(spec.metadata ?? {});
  if (spec.qemu !== undefined) qemuDevicesXml(spec.name, spec.qemu);
  return uuid;
}

function metadataXml(m: DomainMetadata): string {
  const p = NS_PREFIX;
  const lines: string[] = [];
  if (m.profile !== undefined) lines.push(`<${p}:profile>${text('metadata.profile', m.profile, 64)}</${p}:profile>`);
  if (m.diskGiB !== undefined) lines.push(`<${p}:disk-gib>${int('metadata.diskGiB', m.diskGiB, 1, 65536)}</${p}:disk-gib>`);
  if (m.instanceId !== undefined) lines.push(`<${p}:instance-id>${text('metadata.instanceId', m.instanceId, 128)}</${p}:instance-id>`);
  if (m.ipAddress !== undefined) lines.push(`<${p}:ip-address>${text('metadata.ipAddress', m.ipAddress, 64)}</${p}:ip-address>`);
  if (m.accelerator !== undefined) {
    if (m.accelerator !== 'kvm' && m.accelerator !== 'tcg') throw invalid('metadata.accelerator must be kvm or tcg');
    lines.push(`<${p}:accelerator>${m.accelerator}</${p}:accelerator>`);
  }
  const labels = Object.entries(m.labels ?? {});
  if (labels.length > MAX_LABELS) throw invalid(`at most ${MAX_LABELS} labels`);
  if (labels.length > 0) {
    const items = labels
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => {
        if (!LABEL_KEY_RE.test(k)) throw invalid(`label key "${k.slice(0, 64)}" must be 1-63 characters of A-Z a-z 0-9 _ . / -`);
        if (v.length > MAX_TEXT || hasControlChars(v)) throw invalid(`label ${k} must be at most ${MAX_TEXT} printable characters`);
        return `<${p}:label key='${escapeXml(k)}'>${escapeXml(v)}</${p}:label>`;
      });
    lines.push(`<${p}:labels>${items.join('')}</${p}:labels>`);
  }
  return [`<metadata>`, `  <${p}:vm xmlns:${p}='${METADATA_NS}'>`, ...lines.map((l) => `    ${l}`), `  </${p}:vm>`, `</metadata>`].join(
    '\n  ',
  );
}

/** `<domain type='test'>`: what the test driver needs (it runs no guest, so no devices). */
export function testDomainXml(spec: DomainSpec): string {
  const uuid = validateSpec(spec);
  return [
    `<domain type='test'>`,
    `  <name>${escapeXml(spec.name)}</name>`,
    `  <uuid>${uuid}</uuid>`,
    `  ${metadataXml(spec.metadata ?? {})}`,
    `  <memory unit='MiB'>${spec.memoryMiB}</memory>`,
    `  <vcpu placement='static'>${spec.vcpus}</vcpu>`,
    `  <os><type>hvm</type></os>`,
    `  <on_poweroff>destroy</on_poweroff>`,
    `  <on_reboot>restart</on_reboot>`,
    `  <on_crash>destroy</on_crash>`,
    `</domain>`,
    '',
  ].join('\n');
}

/** `<domain type='qemu'|'kvm'>` for a real guest. */
export function qemuDomainXml(spec: DomainSpec, virtType: 'qemu' | 'kvm'): string {
  const uuid = validateSpec(spec);
  const q = spec.qemu ?? {};
  const machine = q.machine ?? 'pc';
  const os = [`<type arch='x86_64' machine='${machine}'>hvm</type>`];
  if (q.kernel !== undefined) {
    os.push(`<kernel>${path('qemu.kernel.path', q.kernel.path)}</kernel>`);
    if (q.kernel.initrdPath !== undefined) os.push(`<initrd>${path('qemu.kernel.initrdPath', q.kernel.initrdPath)}</initrd>`);
    if (q.kernel.cmdline !== undefined) os.push(`<cmdline>${text('qemu.kernel.cmdline', q.kernel.cmdline, 2048)}</cmdline>`);
  } else {
    os.push(`<boot dev='hd'/>`);
  }
  const fwCfg = Object.entries(q.fwCfgFiles ?? {}).map(([name, file]) => {
    if (!FWCFG_NAME_RE.test(name)) throw invalid(`fw_cfg name "${name.slice(0, 64)}" must look like opt/<vendor>/<name>`);
    return `<entry name='${escapeXml(name)}' file='${path(`qemu.fwCfgFiles.${name}`, file)}'/>`;
  });
  const features = ['<acpi/>'];
  if (q.tcgCacheMiB !== undefined && virtType === 'qemu') {
    features.push(`<tcg><tb-cache unit='MiB'>${int('qemu.tcgCacheMiB', q.tcgCacheMiB, 8, 4096)}</tb-cache></tcg>`);
  }
  return [
    `<domain type='${virtType}'>`,
    `  <name>${escapeXml(spec.name)}</name>`,
    `  <uuid>${uuid}</uuid>`,
    `  ${metadataXml(spec.metadata ?? {})}`,
    `  <memory unit='MiB'>${spec.memoryMiB}</memory>`,
    `  <vcpu placement='static'>${spec.vcpus}</vcpu>`,
    `  <os>`,
    ...os.map((l) => `    ${l}`),
    `  </os>`,
    ...(fwCfg.length > 0 ? [`  <sysinfo type='fwcfg'>`, ...fwCfg.map((l) => `    ${l}`), `  </sysinfo>`] : []),
    `  <features>${features.join('')}</features>`,
    `  <on_poweroff>destroy</on_poweroff>`,
    `  <on_reboot>restart</on_reboot>`,
    `  <on_crash>preserve</on_crash>`,
    `  <devices>`,
    ...qemuDevicesXml(spec.name, q).map((l) => `    ${l}`),
    `  </devices>`,
    `</domain>`,
    '',
  ].join('\n');
}

function qemuDevicesXml(name: string, q: QemuDomainSpec): string[] {
  const out: string[] = [];
  const disks = q.disks ?? [];
  if (disks.length > MAX_DISKS) throw invalid(`at most ${MAX_DISKS} disks`);
  disks.forEach((d, i) => {
    const format = d.format ?? 'qcow2';
    if (format !== 'qcow2' && format !== 'raw') throw invalid('disk format must be qcow2 or raw');
    out.push(
      `<disk type='file' device='disk'><driver name='qemu' type='${format}'/>` +
        `<source file='${path(`qemu.disks[${i}].path`, d.path)}'/><target dev='vd${String.fromCharCode(97 + i)}' bus='virtio'/>` +
        `${d.readOnly === true ? '<readonly/>' : ''}</disk>`,
    );
  });
  if (q.network !== undefined) {
    if (!NETWORK_RE.test(q.network)) throw invalid('network must be 1-64 characters of A-Z a-z 0-9 _ . -');
    const mac = q.macAddress ?? macFromName(name);
    if (!MAC_RE.test(mac)) throw invalid('macAddress must look like 52:54:00:12:34:56');
    out.push(
      `<interface type='network'><mac address='${mac.toLowerCase()}'/><source network='${escapeXml(q.network)}'/><model type='virtio'/></interface>`,
    );
  }
  out.push(
    q.serialLogPath !== undefined
      ? `<serial type='file'><source path='${path('qemu.serialLogPath', q.serialLogPath)}' append='on'/><target port='0'/></serial>`
      : `<serial type='pty'><target port='0'/></serial>`,
  );
  for (const [i, share] of (q.shares ?? []).entries()) {
    if (i >= 8) throw invalid('at most 8 shared directories');
    if (!/^[A-Za-z0-9_-]{1,31}$/u.test(share.tag)) throw invalid('a share tag must be 1-31 characters of A-Z a-z 0-9 _ -');
    out.push(
      `<filesystem type='mount' accessmode='mapped'><source dir='${path(`qemu.shares[${i}].hostPath`, share.hostPath)}'/>` +
        `<target dir='${share.tag}'/>${share.readOnly === true ? '<readonly/>' : ''}</filesystem>`,
    );
  }
  if (q.vsockCid !== undefined)
    out.push(`<vsock model='virtio'><cid auto='no' address='${int('qemu.vsockCid', q.vsockCid, 3, 0xfffffffe)}'/></vsock>`);
  out.push(`<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>`);
  out.push(`<panic model='isa'/>`);
  out.push(`<memballoon model='none'/>`);
  return out;
}

/** Our metadata, read back from a domain's XML ({} when the domain was not made by sandboxd). */
export function parseMetadata(xml: string): DomainMetadata {
  const root = new RegExp(
    `<([A-Za-z_][\\w.-]*):vm\\b[^>]*=\\s*["']${METADATA_NS.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}["'][^>]*>([\\s\\S]*?)</\\1:vm>`,
  ).exec(xml);
  if (root === null) return {};
  const p = root[1] ?? NS_PREFIX;
  const body = root[2] ?? '';
  const field = (tag: string): string | undefined => {
    const m = new RegExp(`<${p}:${tag}>([\\s\\S]*?)</${p}:${tag}>`).exec(body);
    return m === null ? undefined : unescapeXml(m[1] ?? '');
  };
  const out: DomainMetadata = {};
  const profile = field('profile');
  if (profile !== undefined) out.profile = profile;
  const disk = field('disk-gib');
  if (disk !== undefined && /^\d+$/.test(disk)) out.diskGiB = Number(disk);
  const instanceId = field('instance-id');
  if (instanceId !== undefined) out.instanceId = instanceId;
  const ip = field('ip-address');
  if (ip !== undefined) out.ipAddress = ip;
  const accelerator = field('accelerator');
  if (accelerator === 'kvm' || accelerator === 'tcg') out.accelerator = accelerator;
  const labelRe = new RegExp(`<${p}:label\\s+key=(["'])(.*?)\\1\\s*(?:/>|>([\\s\\S]*?)</${p}:label>)`, 'g');
  // fromEntries defines own properties, so a key such as __proto__ stays a plain label.
  const labels = Object.fromEntries([...body.matchAll(labelRe)].map((m) => [unescapeXml(m[2] ?? ''), unescapeXml(m[3] ?? '')]));
  if (Object.keys(labels).length > 0) out.labels = labels;
  return out;
}

/** Host paths of a domain's file-backed disks, in XML order. */
export function parseDiskPaths(xml: string): string[] {
  const out: string[] = [];
  for (const disk of xml.matchAll(/<disk\b[\s\S]*?<\/disk>/g)) {
    const src = /<source\s+[^>]*?(?:file|dev)=(["'])(.*?)\1/.exec(disk[0]);
    if (src?.[2] !== undefined) out.push(unescapeXml(src[2]));
  }
  return out;
}

/** MAC addresses of a domain's interfaces, in XML order. */
export function parseMacAddresses(xml: string): string[] {
  return [...xml.matchAll(/<mac\s+address=(["'])([0-9a-fA-F:]{17})\1/g)].map((m) => (m[2] ?? '').toLowerCase());
}
