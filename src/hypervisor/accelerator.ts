/**
 * Which accelerator real guests get on this machine: KVM only when /dev/kvm is backed by real
 * hardware virtualisation (a vmx/svm CPU flag), TCG otherwise. A PVM-backed /dev/kvm (the
 * `kvm_pvm` module of Firecracker-style hosts) hangs stock guest kernels instead of failing, so
 * it counts as none. Only meaningful for a local qemu:///system (or session) host. Probed once.
 */
import { existsSync, readFileSync } from 'node:fs';

export type Accelerator = 'kvm' | 'tcg';

export interface AcceleratorChoice {
  readonly accelerator: Accelerator;
  /** Why, in words (logged at start-up and shown by /healthz/hypervisor). */
  readonly reason: string;
}

let detected: AcceleratorChoice | null = null;

export function detectAccelerator(): AcceleratorChoice {
  detected ??= probe();
  return detected;
}

function probe(): AcceleratorChoice {
  if (!existsSync('/dev/kvm')) return { accelerator: 'tcg', reason: '/dev/kvm is absent' };
  if (existsSync('/sys/module/kvm_pvm'))
    return { accelerator: 'tcg', reason: '/dev/kvm is kvm_pvm (PVM), which hangs stock guest kernels' };
  const cpu = (() => {
    try {
      return readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return '';
    }
  })();
  if (!/\b(vmx|svm)\b/.test(cpu)) return { accelerator: 'tcg', reason: 'the CPU has no vmx/svm flag' };
  return { accelerator: 'kvm', reason: 'hardware virtualisation (vmx/svm) with /dev/kvm' };
}
