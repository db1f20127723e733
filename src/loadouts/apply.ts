/**
 * What a VM gets at provisioning (README "Startup profiles and loadouts"): its loadout's spec with
 * its startup profile's `agent.env` laid over the loadout's `environment` (provisioningMaterial).
 * The provisioner keeps a copy in `<vm>/loadout.json` (a later change of the profile does not
 * change a VM that exists; an agent restart or a deploy-agent uses the copy).
 *
 * Where it is applied:
 * - local agents (test-driver VMs; the host plays the guest): the provisioner writes the files into
 *   the VM's work directory (src/core/loadout-apply.ts) and the agent process gets the environment;
 * - qemu guests booted from a built image (minimal, debian): the material goes to the guest by
 *   fw_cfg (`loadout.json`) and the guest agent applies it (`--loadout-file`, the same code);
 * - qemu guests from a cloud-init base image (src/vms/cloud-init.ts): files by write_files under
 *   /home/agent/workspace, packages by cloud-init's `packages:` (apt in the guest), the environment
 *   as the agent unit's EnvironmentFile; tools are expected to come with the packages or the image.
 */
import type { LoadoutSpec, ProvisioningMaterial } from '../core/loadout-apply.js';

export { applyLocally, LOCAL_REPORT_PATH, type LocalApplyReport, type ProvisioningMaterial } from '../core/loadout-apply.js';

/** The loadout spec plus the profile env; null when there is nothing to apply. */
export function provisioningMaterial(
  loadout: (LoadoutSpec & { readonly name: string }) | null,
  profileEnv: Readonly<Record<string, string>>,
): ProvisioningMaterial | null {
  if (loadout === null && Object.keys(profileEnv).length === 0) return null;
  return {
    loadout: loadout?.name ?? null,
    packages: loadout?.packages ?? [],
    tools: loadout?.tools ?? [],
    files: loadout?.files ?? [],
    environment: { ...(loadout?.environment ?? {}), ...profileEnv },
  };
}

/** One line of a systemd EnvironmentFile: the value double-quoted, with \ and " escaped (systemd expands no variables there). */
export function environmentFileLine(key: string, value: string): string {
  return `${key}="${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
