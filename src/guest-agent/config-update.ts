/**
 * Settings the server may change at run time (ConfigUpdate.config and RegistrationAck.config).
 * Known keys:
 *
 *   heartbeat_interval_seconds  integer 1-3600: Heartbeat and Metrics interval
 *   log_level                   trace, debug, info, warn, error, fatal or silent
 *
 * Unknown keys and invalid values are ignored with a log line; nothing needs a restart.
 */
import { AGENT_LOG_LEVELS, type AgentLogLevel } from './config.js';
import type { Logger } from './log.js';

export interface LiveSettings {
  setHeartbeatSeconds(seconds: number): void;
  setLogLevel(level: AgentLogLevel): void;
}

/** Applies the known keys of a config map. */
export function applyConfigUpdate(config: Readonly<Record<string, string>>, to: LiveSettings, log: Logger): void {
  for (const [key, value] of Object.entries(config)) {
    if (key === 'heartbeat_interval_seconds') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1 || n > 3600) {
        log.warn({ key, value }, 'config value out of range 1-3600; ignored');
        continue;
      }
      to.setHeartbeatSeconds(n);
    } else if (key === 'log_level') {
      const level = AGENT_LOG_LEVELS.find((l) => l === value);
      if (level === undefined) {
        log.warn({ key, value }, 'unknown log level; ignored');
        continue;
      }
      to.setLogLevel(level);
    } else {
      log.info({ key }, 'unknown config key ignored');
      continue;
    }
    log.info({ key, value }, 'config applied');
  }
}
