/**
 * The "create VM" form: field rules (the server's, spec 4.3 and src/vms/create-request.ts — a unit
 * test keeps the two in step) and the validation that turns the form's text inputs into the
 * request body or a message per field. The server validates again; its error is shown when the
 * two ever disagree.
 */

export const VM_NAME_PATTERN = /^agent-[a-z0-9-]+$/;
export const VM_NAME_MAX_CHARS = 63;
export const VM_PROFILES = ['svc-dev', 'basic'] as const;
export const VM_LIMITS = {
  vcpus: { min: 1, max: 64, default: 4 },
  memory_mb: { min: 256, max: 262_144, default: 8192 },
  disk_gb: { min: 1, max: 2048, default: 50 },
} as const;

/** What the form's inputs hold (text, as typed). */
export interface VmFormInput {
  name: string;
  profile: string;
  vcpus: string;
  memory_mb: string;
  disk_gb: string;
}

/** The body of POST /api/v1/vms. */
export interface CreateVmBody {
  name: string;
  profile: string;
  vcpus: number;
  memory_mb: number;
  disk_gb: number;
}

export type VmFormField = keyof VmFormInput;

export type VmFormResult =
  { readonly ok: true; readonly body: CreateVmBody } | { readonly ok: false; readonly errors: Partial<Record<VmFormField, string>> };

/** The form's initial values (the server's defaults). */
export function defaultVmForm(): VmFormInput {
  return {
    name: '',
    profile: VM_PROFILES[0],
    vcpus: String(VM_LIMITS.vcpus.default),
    memory_mb: String(VM_LIMITS.memory_mb.default),
    disk_gb: String(VM_LIMITS.disk_gb.default),
  };
}

function intField(text: string, field: keyof typeof VM_LIMITS, label: string, errors: Partial<Record<VmFormField, string>>): number {
  const lim = VM_LIMITS[field];
  const t = text.trim();
  const v = /^\d+$/.test(t) ? Number(t) : Number.NaN;
  if (!Number.isSafeInteger(v) || v < lim.min || v > lim.max)
    errors[field] = `${label} must be a whole number from ${lim.min} to ${lim.max}`;
  return v;
}

/** Validates the form; on success the body to POST. */
export function validateVmForm(input: VmFormInput): VmFormResult {
  const errors: Partial<Record<VmFormField, string>> = {};
  const name = input.name.trim();
  if (name === '') errors.name = 'Name is required';
  else if (!name.startsWith('agent-')) errors.name = 'Name must start with agent-';
  else if (name.length > VM_NAME_MAX_CHARS) errors.name = `Name must be at most ${VM_NAME_MAX_CHARS} characters`;
  else if (!VM_NAME_PATTERN.test(name)) errors.name = 'Use lower-case letters, digits and dashes after agent-';
  if (!(VM_PROFILES as readonly string[]).includes(input.profile)) errors.profile = `Profile must be one of ${VM_PROFILES.join(', ')}`;
  const vcpus = intField(input.vcpus, 'vcpus', 'vCPUs', errors);
  const memory_mb = intField(input.memory_mb, 'memory_mb', 'Memory (MiB)', errors);
  const disk_gb = intField(input.disk_gb, 'disk_gb', 'Disk (GiB)', errors);
  if (Object.keys(errors).length > 0) return { ok: false, errors };
  return { ok: true, body: { name, profile: input.profile, vcpus, memory_mb, disk_gb } };
}

/**
 * A suggested name not in `taken`: `agent-1`, `agent-2`, … (the form pre-fills it so creating a
 * VM is one click for the common case).
 */
export function suggestVmName(taken: Iterable<string>): string {
  const used = new Set(taken);
  for (let i = 1; ; i++) {
    const name = `agent-${i}`;
    if (!used.has(name)) return name;
  }
}
