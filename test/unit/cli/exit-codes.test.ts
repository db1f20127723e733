import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../../src/cli/args.js';
import { ConfigFileError } from '../../../src/cli/config.js';
import { errorLine, EXIT_CODE_TABLE, ExitCode, exitCodeFor, OutcomeFailedError } from '../../../src/cli/exit-codes.js';
import { mainHelp } from '../../../src/cli/help.js';
import { COMMANDS } from '../../../src/cli/run.js';
import { ApiError } from '../../../src/client/api-error.js';

describe('exit codes', () => {
  test('map errors to the documented codes', () => {
    const cases: [unknown, number][] = [
      [new UsageError('bad'), 2],
      [new ConfigFileError('bad file'), 2],
      [new ApiError(400, 'INVALID_VM_NAME', 'x'), 2],
      [new ApiError(413, 'request.body_too_large', 'x'), 2],
      [new ApiError(404, 'VM_NOT_FOUND', 'x'), 3],
      [new ApiError(409, 'VM_RUNNING', 'x'), 4],
      [new ApiError(400, 'task.not_cancellable', 'x'), 4],
      [new ApiError(500, 'server.internal', 'x'), 5],
      [new ApiError(503, 'HYPERVISOR_UNAVAILABLE', 'x'), 5],
      [new ApiError(0, 'network', 'x'), 5],
      [new ApiError(0, 'timeout', 'x'), 5],
      [new OutcomeFailedError('PROVISIONING_ERROR', 'x'), 6],
      [new ApiError(403, 'route.forbidden', 'x'), 1],
      [new Error('disk full'), 1],
    ];
    for (const [err, code] of cases) assert.equal(exitCodeFor(err), code, String(err));
  });

  test('sbx --help documents every code', () => {
    const help = mainHelp(COMMANDS, '0.0.0');
    for (const code of Object.values(ExitCode)) assert.match(help, new RegExp(`^ *${code}  \\S`, 'm'));
    assert.equal(EXIT_CODE_TABLE.length, Object.keys(ExitCode).length);
  });

  test("error lines print the server's code and message", () => {
    assert.equal(errorLine(new ApiError(404, 'VM_NOT_FOUND', 'no VM named agent-x')), 'sbx: VM_NOT_FOUND: no VM named agent-x');
    assert.equal(errorLine(new UsageError('missing NAME', 'usage: sbx vm get --help')), 'sbx: missing NAME\nusage: sbx vm get --help');
  });
});
