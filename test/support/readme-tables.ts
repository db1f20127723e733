/**
 * Every README table that is generated from code, by marker name. `npm run docs` writes them;
 * test/unit/docs/readme-tables.test.ts fails when README and code disagree.
 */
import { operationStatusTableMarkdown } from '../../src/core/operation-state.js';
import { configMarkdownTable } from '../../src/config/load.js';
import { errorsMarkdownTable } from '../../src/core/errors.js';
import { programsMarkdownTable } from '../../src/setup/programs.mjs';
import { transitionTableMarkdown } from '../../src/core/state-machine.js';
import { TASK_TRANSITIONS, TASK_TRANSITION_TRIGGERS } from '../../src/tasks/task-state.js';
import { agentStatusTableMarkdown } from '../../src/core/agent-status.js';
import { agentStateTableMarkdown } from '../../src/guest-agent/agent-state.js';
import { sessionTransitionsMarkdown } from '../../src/sessions/session-state.js';
import { leaseTransitionsMarkdown } from '../../src/sessions/lease.js';
import { rolesMarkdownTable } from '../../src/auth/permissions.js';
import { credentialLeaseTransitionsMarkdown } from '../../src/credentials/lease-types.js';
import { sshLeaseTransitionsMarkdown } from '../../src/gateway/ssh/lease-types.js';
import { checkpointTableMarkdown } from '../../src/checkpoints/checkpoint-state.js';
import { commandStatusTableMarkdown } from '../../src/celld/effect-ledger.js';
import { desktopTablesMarkdown } from '../../src/desktop/desktop-state.js';
import { missionTableMarkdown } from '../../src/missions/mission-state.js';

export function readmeTables(): Record<string, string> {
  return {
    'config-table': configMarkdownTable(),
    'errors-table': errorsMarkdownTable(),
    'roles-table': rolesMarkdownTable(),
    'task-states-table': transitionTableMarkdown(TASK_TRANSITIONS, TASK_TRANSITION_TRIGGERS),
    'operation-states-table': operationStatusTableMarkdown(),
    // Every other machine on the core StateMachine (src/core/state-machine.ts).
    'agent-status-table': agentStatusTableMarkdown(),
    'guest-agent-states-table': agentStateTableMarkdown(),
    'session-states-table': sessionTransitionsMarkdown(),
    'lease-states-table': leaseTransitionsMarkdown(),
    'credential-lease-states-table': credentialLeaseTransitionsMarkdown(),
    'ssh-lease-states-table': sshLeaseTransitionsMarkdown(),
    'checkpoint-states-table': checkpointTableMarkdown(),
    'programs-table': programsMarkdownTable(),
    'celld-command-states-table': commandStatusTableMarkdown(),
    'desktop-states-table': desktopTablesMarkdown(),
    'mission-states-table': missionTableMarkdown(),
  };
}
