/**
 * Reading a saved run (`npm run --silent bench > run.ndjson`) for `--from` and `--compare`: one
 * JSON object a line. Result lines (an object with a string `scenario`) are kept in order; a
 * `{"machine":{...}}` line (`--machine`) says where the run happened; blank lines are skipped;
 * anything else (a stray log line, a truncated line) is reported, not fatal, so a file cut short
 * by Ctrl-C still renders.
 */
import { readFile } from 'node:fs/promises';
import type { ResultLine } from '../types.js';
import { machineFromRecord, type MachineInfo } from './machine.js';

export interface SavedRun {
  /** The file it came from, as given. */
  readonly source: string;
  readonly lines: readonly ResultLine[];
  /** From a `{"machine":…}` line, or null when the file has none. */
  readonly machine: Partial<MachineInfo> | null;
  /** Lines that were neither: "line N: why". */
  readonly skipped: readonly string[];
}

function isResultLine(v: unknown): v is ResultLine {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as { scenario?: unknown }).scenario === 'string';
}

/** Parses NDJSON text. A later line of the same scenario replaces an earlier one. */
export function parseRun(text: string, source: string): SavedRun {
  const byName = new Map<string, ResultLine>();
  let machine: Partial<MachineInfo> | null = null;
  const skipped: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      skipped.push(`line ${i + 1}: not JSON`);
      return;
    }
    if (isResultLine(v)) {
      byName.delete(v.scenario);
      byName.set(v.scenario, v);
    } else if (typeof v === 'object' && v !== null && 'machine' in v) {
      machine = machineFromRecord(v.machine);
    } else skipped.push(`line ${i + 1}: neither a result line nor a machine record`);
  });
  return { source, lines: [...byName.values()], machine, skipped };
}

/** Reads and parses a saved run; rejects when the file cannot be read or holds no result line. */
export async function readRun(path: string): Promise<SavedRun> {
  const run = parseRun(await readFile(path, 'utf8'), path);
  if (run.lines.length === 0) throw new Error(`${path} holds no bench result line`);
  return run;
}
