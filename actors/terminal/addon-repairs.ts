/**
 * Repairs around xterm.js's serialize addon (0.14), each found by replaying its output into a
 * second terminal (test/unit/terminal/session-screen.test.ts, its property test among them):
 *
 * - Rows below the last written cell that were erased with a coloured background (a TUI clearing
 *   the screen blue) are left out: paintErasedColour paints every empty coloured run first.
 * - A wrapped row that starts with a blank (erased after it wrapped) is taken for a row the
 *   previous one's last character wrapped into, so the addon draws its blanks with the cursor
 *   still waiting to wrap: they land on the previous row and every row after is drawn one row too
 *   high. withBlankContinuationsUnwrapped hides the wrap flag of those rows while the addon runs
 *   (it then ends the previous row with a line break) and rewrap makes the wrap again afterwards.
 * - An empty row that wraps into the next (a wide character that did not fit) keeps a '-' of the
 *   addon's forced wrap: eraseEmptyWrappedRows erases it again.
 *
 * The wrap flags are xterm internals (BufferLine.isWrapped of the pinned @xterm/headless); when
 * they are not found the second repair is skipped.
 */
import type { IBuffer, IBufferCell, IBufferLine, Terminal } from '@xterm/headless';
import { colourParams, sgrOf } from './sgr.js';

interface InternalBuffer {
  readonly ybase: number;
  readonly lines: { get(index: number): { isWrapped: boolean } | undefined };
}

interface BufferInternals {
  readonly _core?: { readonly _bufferService?: { readonly buffers?: { readonly normal?: InternalBuffer; readonly alt?: InternalBuffer } } };
}

/** Viewport rows (per buffer) whose wrap flag withBlankContinuationsUnwrapped hid. */
export interface HiddenWraps {
  readonly normal: readonly number[];
  readonly alternate: readonly number[];
}

/** Runs `fn` with the wrap flag of blank-starting wrapped rows cleared, and restores them. */
export function withBlankContinuationsUnwrapped<T>(term: Terminal, fn: (hidden: HiddenWraps) => T): T {
  const buffers = (term as unknown as BufferInternals)._core?._bufferService?.buffers;
  const cleared: { isWrapped: boolean }[] = [];
  const hide = (api: IBuffer, internal: InternalBuffer | undefined): number[] => {
    const rows: number[] = [];
    if (internal === undefined || typeof internal.ybase !== 'number' || typeof internal.lines?.get !== 'function') return rows;
    const cell = api.getNullCell();
    for (let y = 1; y < term.rows; y++) {
      const line = api.getLine(api.viewportY + y);
      if (line?.isWrapped !== true || line.getCell(0, cell)?.getChars() !== '') continue;
      const raw = internal.lines.get(internal.ybase + y);
      if (raw?.isWrapped !== true) continue;
      raw.isWrapped = false;
      cleared.push(raw);
      rows.push(y);
    }
    return rows;
  };
  try {
    return fn({ normal: hide(term.buffer.normal, buffers?.normal), alternate: hide(term.buffer.alternate, buffers?.alt) });
  } finally {
    for (const raw of cleared) raw.isWrapped = true;
  }
}

/**
 * Makes the wrap into each of `rows` again: the previous row's last character is written again,
 * then a space that wraps onto the row's first cell, which is put back as the blank it was.
 * Leaves the cursor elsewhere and the SGR state changed.
 */
export function rewrap(buffer: IBuffer, cols: number, rows: readonly number[]): string {
  let out = '';
  const cell = buffer.getNullCell();
  for (const y of rows) {
    const prev = buffer.getLine(buffer.viewportY + y - 1);
    const line = buffer.getLine(buffer.viewportY + y);
    if (prev === undefined || line === undefined) continue;
    let x = cols - 1;
    if (prev.getCell(x, cell)?.getWidth() === 0 && x > 0) prev.getCell(--x, cell);
    const lastBlank = cell.getChars() === '';
    out += `\x1b[${y};${x + 1}H${drawCell(cell)}`;
    line.getCell(0, cell);
    out += `${drawCell(cell)}\x1b[D\x1b[X`;
    // a blank last cell became a space: erase it in place (writing would wait to wrap again)
    if (lastBlank && prev.getCell(cols - 1, cell) !== undefined) out += `\x1b[${y};${cols}H\x1b[${bgOnly(cell)}m\x1b[X`;
  }
  return out;
}

/** A cell as SGR and text; a blank as a space in its background (for ECH to erase again). */
function drawCell(cell: IBufferCell): string {
  if (cell.getChars() !== '') return `\x1b[${sgrOf(cell)}m${cell.getChars()}`;
  return `\x1b[${bgOnly(cell)}m `;
}

/** SGR parameters of the cell's background alone (what an erase fills with). */
function bgOnly(cell: IBufferCell): string {
  return cell.isBgDefault() ? '0' : `0;${colourParams(48, cell.isBgRGB(), cell.getBgColor())}`;
}

/**
 * Paints the empty cells of the visible rows that have a background colour (CUP, SGR, ECH per
 * run), then returns to the reset state the addon's output expects: home, default attributes.
 * Nothing when there are none, the usual case.
 */
export function paintErasedColour(buffer: IBuffer, rows: number): string {
  let out = '';
  const cell = buffer.getNullCell();
  for (let y = 0; y < rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    if (line !== undefined) out += paintRow(line, y, cell);
  }
  return out === '' ? '' : `${out}\x1b[m\x1b[H`;
}

/** The coloured blank runs of one row (viewport row `y`), each as CUP, SGR, ECH. */
function paintRow(line: IBufferLine, y: number, cell: IBufferCell): string {
  let out = '';
  let runStart = -1;
  let runBg = '';
  const flush = (end: number): void => {
    if (runStart >= 0) out += `\x1b[${y + 1};${runStart + 1}H\x1b[${runBg}m\x1b[${end - runStart}X`;
    runStart = -1;
  };
  for (let x = 0; x < line.length; x++) {
    line.getCell(x, cell);
    const erasedColour = cell.getChars() === '' && cell.getWidth() > 0 && !cell.isBgDefault();
    const bg = erasedColour ? colourParams(48, cell.isBgRGB(), cell.getBgColor()) : '';
    if (runStart >= 0 && bg !== runBg) flush(x);
    if (erasedColour && runStart < 0) {
      runStart = x;
      runBg = bg;
    }
  }
  flush(line.length);
  return out;
}

/** Rows of blanks that wrap into the next one, erased and painted again. Leaves the SGR changed. */
export function eraseEmptyWrappedRows(buffer: IBuffer, cols: number, rows: number): string {
  let out = '';
  const cell = buffer.getNullCell();
  for (let y = 0; y + 1 < rows; y++) {
    if (buffer.getLine(buffer.viewportY + y + 1)?.isWrapped !== true) continue;
    const line = buffer.getLine(buffer.viewportY + y);
    if (line === undefined) continue;
    let empty = true;
    for (let x = 0; empty && x < line.length; x++) empty = line.getCell(x, cell)?.getChars() === '';
    if (empty) out += `\x1b[${y + 1};1H\x1b[m\x1b[${cols}X${paintRow(line, y, cell)}`;
  }
  return out;
}
