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

export function readmeTables(): Record<string, string> {
  return {
    'config-table': configMarkdownTable(),
    'errors-table': errorsMarkdownTable(),
    'task-states-table': transitionTableMarkdown(TASK_TRANSITIONS, TASK_TRANSITION_TRIGGERS),
    'operation-states-table': operationStatusTableMarkdown(),
    'programs-table': programsMarkdownTable(),
  };
}
