/**
 * The agent's version (AgentRegistration.agent_version): package.json's, read once.
 */
import { readFileSync } from 'node:fs';

function read(): string {
  // src/guest-agent/version.ts → <build>/src/guest-agent/version.js; package.json is three levels up in both
  // the build folder layout (dist/src/guest-agent) and an installed package.
  for (const rel of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'sandboxd' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next location
    }
  }
  return '0.0.0-unknown';
}

/** e.g. "0.1.0". */
export const AGENT_VERSION: string = read();
