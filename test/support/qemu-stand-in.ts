/**
 * libvirt's qemu driver as the hypervisor port shows it, for the provisioner's unit tests of qemu
 * hosts (the SSH and deferred-enrollment fw_cfg files): domains are defined, listed, started and
 * undefined here, on `qemu:///system`; the real driver's end-to-end tests are realvm*.test.ts.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DomainInfo, DomainSpec, VmState } from '../../src/hypervisor/port.js';

/** libvirt's qemu driver as the port shows it: domains defined here, on qemu:///system. */
export class QemuStandIn {
  readonly specs = new Map<string, DomainSpec>();
  readonly states = new Map<string, VmState>();
  #info(spec: DomainSpec): DomainInfo {
    return {
      name: spec.name,
      uuid: spec.uuid ?? '',
      state: this.states.get(spec.name) ?? 'stopped',
      vcpus: spec.vcpus,
      memoryMiB: spec.memoryMiB,
      host: 'qemu:///system',
      uptimeSeconds: null,
      ipAddress: spec.metadata?.ipAddress ?? null,
      metadata: spec.metadata ?? {},
    };
  }
  define(spec: DomainSpec): Promise<DomainInfo> {
    this.specs.set(spec.name, spec);
    return Promise.resolve(this.#info(spec));
  }
  get(name: string): Promise<DomainInfo | null> {
    const s = this.specs.get(name);
    return Promise.resolve(s === undefined ? null : this.#info(s));
  }
  list(): Promise<DomainInfo[]> {
    return Promise.resolve([...this.specs.values()].map((s) => this.#info(s)));
  }
  destroyDomain(name: string): Promise<DomainInfo> {
    this.states.set(name, 'stopped');
    return this.get(name) as Promise<DomainInfo>;
  }
  startDomain(name: string): Promise<DomainInfo> {
    this.states.set(name, 'running');
    return this.get(name) as Promise<DomainInfo>;
  }
  undefine(name: string): Promise<void> {
    this.specs.delete(name);
    return Promise.resolve();
  }
}

/** A built image folder of `kind` under `dir` (manifest.json beside a small raw disk); returns the disk's path. */
export async function fakeBuiltImage(dir: string, kind: 'debian' | 'minimal'): Promise<string> {
  const d = join(dir, `image-${kind}`);
  await mkdir(d, { recursive: true });
  await writeFile(
    join(d, 'manifest.json'),
    JSON.stringify({ kind, cmdline: 'console=ttyS0', files: { kernel: 'vmlinux', initrd: 'initrd.img', disk: 'disk.ext4' } }),
  );
  await writeFile(join(d, 'disk.ext4'), Buffer.alloc(1024 * 1024));
  return join(d, 'disk.ext4');
}
