/**
 * What a client draws: a headless xterm.js terminal fed a Keyframe's snapshot and then the
 * connection's later Output and Resize frames, the way a pty-ws.v1 client repaints after a join
 * (frames with sequence ≤ the Keyframe's anchor_sequence are already in the snapshot).
 */
import xtermHeadless from '@xterm/headless';
import { payloadOf, type SeenFrame } from './pty-conformance-rules.js';

// CommonJS package: under NodeNext the default import is module.exports.
const { Terminal } = xtermHeadless;
type Term = InstanceType<typeof Terminal>;

function write(term: Term, data: Uint8Array): Promise<void> {
  return new Promise((resolve) => term.write(data, resolve));
}

/** The visible rows of `term`, trailing blanks trimmed. */
function viewport(term: Term): string[] {
  const buf = term.buffer.active;
  const rows: string[] = [];
  for (let y = 0; y < term.rows; y++) rows.push(buf.getLine(buf.baseY + y)?.translateToString(true) ?? '');
  return rows;
}

/**
 * The screen after `keyframe` (a Keyframe frame of `frames`) and the session frames after it up
 * to sequence `uptoSequence` (default: all received).
 */
export async function drawScreen(
  frames: readonly SeenFrame[],
  keyframe: SeenFrame,
  uptoSequence = Number.MAX_SAFE_INTEGER,
): Promise<string[]> {
  const k = payloadOf(keyframe, 'Keyframe');
  const term = new Terminal({ cols: k.snapshot_cols, rows: k.snapshot_rows, scrollback: 0, allowProposedApi: true });
  try {
    await write(term, Buffer.from(k.snapshot, 'base64'));
    for (const f of frames) {
      if (f.index <= keyframe.index || f.local || f.sequence === undefined) continue;
      if (f.sequence <= k.anchor_sequence || f.sequence > uptoSequence) continue;
      if (f.kind === 'Output') await write(term, f.bytes!);
      else if (f.kind === 'Resize') {
        const r = payloadOf(f, 'Resize');
        term.resize(r.cols, r.rows);
      }
    }
    return viewport(term);
  } finally {
    term.dispose();
  }
}

/** The screen a Keyframe's snapshot alone draws. */
export async function snapshotScreen(keyframe: SeenFrame): Promise<string[]> {
  return await drawScreen([], keyframe);
}
