/**
 * The VM dialogs: create (validated form; the server's error shown in the dialog, on the field it
 * concerns when it names one) and delete (confirmation with the force and delete_disk options).
 */
import { ApiError } from '../../../client/api-error.js';
import type { Vm } from '../../../client/types.js';
import { deleteNeedsForce } from '../../model/badges.js';
import {
  defaultVmForm,
  suggestVmName,
  validateVmForm,
  VM_LIMITS,
  VM_PROFILES,
  type VmFormField,
  type VmFormInput,
} from '../../model/vm-form.js';
import type { AppContext } from '../context.js';
import { field, h, setFieldError, setText } from '../dom.js';
import { confirmDialog, openDialog } from '../ui/dialog.js';
import { describeError } from '../ui/toast.js';
import { withBusy } from '../ui/widgets.js';

/** Opens the create form; on success the operation is tracked by the fleet service. */
export function openCreateVmDialog(app: AppContext): void {
  const d = openDialog('Create a VM');
  const init = defaultVmForm();
  init.name = suggestVmName(app.fleet.vms.map((v) => v.name));
  const num = (name: string, value: string, min: number, max: number): HTMLInputElement =>
    h('input', { name, type: 'number', inputmode: 'numeric', min, max, step: 1, value, required: true });
  const controls: Record<VmFormField, HTMLInputElement | HTMLSelectElement> = {
    name: h('input', {
      name: 'name',
      type: 'text',
      value: init.name,
      required: true,
      autocomplete: 'off',
      spellcheck: 'false',
      maxlength: 63,
    }),
    profile: h('select', { name: 'profile' }, ...VM_PROFILES.map((p) => h('option', { value: p, selected: p === init.profile }, p))),
    vcpus: num('vcpus', init.vcpus, VM_LIMITS.vcpus.min, VM_LIMITS.vcpus.max),
    memory_mb: num('memory_mb', init.memory_mb, VM_LIMITS.memory_mb.min, VM_LIMITS.memory_mb.max),
    disk_gb: num('disk_gb', init.disk_gb, VM_LIMITS.disk_gb.min, VM_LIMITS.disk_gb.max),
  };
  const fields = {
    name: field('Name', controls.name, 'agent- followed by lower-case letters, digits or dashes'),
    profile: field('Profile', controls.profile, 'svc-dev: the managed development image; basic: a plain guest'),
    vcpus: field('vCPUs', controls.vcpus, `${VM_LIMITS.vcpus.min}–${VM_LIMITS.vcpus.max}`),
    memory_mb: field('Memory (MiB)', controls.memory_mb, `${VM_LIMITS.memory_mb.min}–${VM_LIMITS.memory_mb.max}`),
    disk_gb: field('Disk (GiB)', controls.disk_gb, `${VM_LIMITS.disk_gb.min}–${VM_LIMITS.disk_gb.max}`),
  };
  const formError = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create VM');
  const cancel = h('button', { type: 'button', class: 'btn' }, 'Cancel');
  cancel.addEventListener('click', () => d.close());
  const form = h(
    'form',
    { class: 'form', novalidate: true },
    fields.name.el,
    fields.profile.el,
    h('div', { class: 'form-row' }, fields.vcpus.el, fields.memory_mb.el, fields.disk_gb.el),
    formError,
  );
  d.body.appendChild(form);
  d.actions.append(cancel, submit);
  submit.setAttribute('form', (form.id = 'create-vm-form'));

  const read = (): VmFormInput => ({
    name: controls.name.value,
    profile: controls.profile.value,
    vcpus: controls.vcpus.value,
    memory_mb: controls.memory_mb.value,
    disk_gb: controls.disk_gb.value,
  });
  const showErrors = (errors: Partial<Record<VmFormField, string>>): void => {
    for (const k of Object.keys(controls) as VmFormField[]) setFieldError(controls[k], fields[k].error, errors[k]);
  };
  for (const k of Object.keys(controls) as VmFormField[]) {
    controls[k].addEventListener('blur', () => {
      const r = validateVmForm(read());
      setFieldError(controls[k], fields[k].error, r.ok ? undefined : r.errors[k]);
    });
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    formError.hidden = true;
    const r = validateVmForm(read());
    if (!r.ok) {
      showErrors(r.errors);
      const first = (Object.keys(controls) as VmFormField[]).find((k) => r.errors[k] !== undefined);
      if (first !== undefined) controls[first].focus();
      return;
    }
    showErrors({});
    void withBusy(submit, async () => {
      try {
        const accepted = await app.api.createVm(r.body);
        app.fleet.track(accepted, `Create ${r.body.name}`);
        for (const w of accepted.warnings ?? []) app.toasts.info('Note', w);
        d.close();
      } catch (err) {
        // Put the server's answer where the user looks: on the name field when it is about the name.
        if (err instanceof ApiError && (err.code === 'INVALID_VM_NAME' || err.code === 'VM_ALREADY_EXISTS')) {
          setFieldError(controls.name, fields.name.error, `${err.message} (${err.code})`);
          controls.name.focus();
        }
        setText(formError, describeError(err));
        formError.hidden = false;
      }
    });
  });
  const nameInput = controls.name as HTMLInputElement;
  nameInput.focus();
  nameInput.select();
}

/** Asks, then deletes a VM; resolves when done (errors are toasted). */
export async function confirmDeleteVm(app: AppContext, vm: Vm): Promise<void> {
  const running = deleteNeedsForce(vm.state);
  const choice = await confirmDialog({
    title: `Delete ${vm.name}?`,
    message: running
      ? `${vm.name} is ${vm.state}. Deleting it powers it off and removes its definition.`
      : `This removes the definition of ${vm.name}. Its disk is kept unless you tick the box below.`,
    confirmLabel: 'Delete VM',
    danger: true,
    options: [
      {
        name: 'force',
        label: 'Force',
        hint: running ? 'required: the VM is running and is powered off first' : 'power off first if it is running',
        checked: running,
      },
      { name: 'delete_disk', label: 'Also delete its disk', hint: 'cannot be undone' },
    ],
  });
  if (choice === null) return;
  try {
    const r = await app.api.deleteVm(vm.name, { force: choice['force'] === true, deleteDisk: choice['delete_disk'] === true });
    app.toasts.success(`Deleted ${r.name}`, r.disk_deleted ? 'Its disk was deleted too.' : 'Its disk was kept.');
  } catch (err) {
    app.toasts.error(`Could not delete ${vm.name}`, err);
  } finally {
    app.fleet.refresh();
  }
}
