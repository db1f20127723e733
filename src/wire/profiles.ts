/**
 * Startup profiles and loadouts on the wire (README "Startup profiles and loadouts"; JSON Schemas
 * src/profiles/startup-profile-v1.schema.json and src/loadouts/loadout-v1.schema.json).
 */

/** A startup profile (GET /api/v2/startup-profiles/{name}). */
export interface StartupProfileJson {
  schema_version: 'sandboxd.startup-profile/v1';
  name: string;
  description: string;
  /** svc-dev and basic: selectable, never changed or deleted. */
  builtin: boolean;
  vcpus: number;
  memory_mb: number;
  disk_gb: number;
  image: string | null;
  network: string | null;
  agent: { agentshare: boolean; enrollment: 'mtls' | 'deferred'; env: Record<string, string> };
  loadout: string | null;
  /** The ETag; +1 per update. */
  revision: number;
  created_at: string;
  updated_at: string;
}

/** A loadout (GET /api/v2/loadouts/{name}); `files[].content` and `document` in the detail only. */
export interface LoadoutJson {
  schema_version: 'sandboxd.loadout/v1';
  name: string;
  description: string;
  labels: Record<string, string>;
  packages: string[];
  tools: string[];
  environment: Record<string, string>;
  files: { path: string; mode: string; size_bytes: number; content?: string }[];
  document_sha256: string;
  created_at: string;
  document?: string;
}

/** A GET /api/v1/loadouts entry: the reference dashboard's shape. */
export interface ReferenceLoadoutJson {
  name: string;
  /** `profiles/<name>.yaml`: what the reference dashboard sends back as the VM create `loadout`. */
  path: string;
  description: string;
  category?: string;
  complexity?: string;
}
