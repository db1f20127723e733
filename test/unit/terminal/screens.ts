/**
 * Test kit for screen states: a reference headless terminal, what a user sees on it (lines,
 * colours and attributes per cell, cursor, which screen), and a snapshot replayed into a fresh
 * terminal the way a client does it.
 */
import xtermHeadless from '@xterm/headless';
import type { Terminal as TerminalType, IBufferCell } from '@xterm/headless';

const { Terminal } = xtermHeadless;

export function newTerminal(cols: number, rows: number): TerminalType {
  return new Terminal({ cols, rows, scrollback: 0, allowProposedApi: true });
}

/** Writes and waits until xterm has parsed it. */
export function write(term: TerminalType, data: string | Uint8Array): Promise<void> {
  return new Promise((resolve) => term.write(data, resolve));
}

export interface Screen {
  buffer: 'normal' | 'alternate';
  cursor: { x: number; y: number };
  /** Text per row, without trailing blanks (a user cannot tell them from spaces). */
  lines: string[];
  /** Per row below the top, whether it continues the row above (wrapped onto it): a resize reflows these. */
  wrapped: boolean[];
  /** Per row, each cell's look: text cells by colour and attributes, blanks by background. */
  looks: string[];
}

/** A colour as seen: default, palette index (16 or 256 colour SGR alike) or RGB. */
function colour(isDefault: boolean, isRgb: boolean, value: number): string {
  return isDefault ? 'default' : `${isRgb ? 'rgb' : 'palette'}:${value}`;
}

function look(c: IBufferCell): string {
  const bg = colour(c.isBgDefault(), c.isBgRGB(), c.getBgColor());
  // a blank looks the same as a space unless the space is drawn on (inverse, lines through it)
  const drawn = c.isInverse() || c.isUnderline() || c.isStrikethrough() || c.isOverline();
  if (c.getChars() === '' || (c.getChars() === ' ' && drawn === 0)) return `_${bg}`;
  const flags = [c.isBold(), c.isDim(), c.isItalic(), c.isUnderline(), c.isBlink(), c.isInverse(), c.isInvisible(), c.isStrikethrough()]
    .map((f) => (f === 0 ? '0' : '1'))
    .join('');
  return `${colour(c.isFgDefault(), c.isFgRGB(), c.getFgColor())}/${bg}/${flags}`;
}

/** What is on the visible screen of `term` now. */
export function screenOf(term: TerminalType): Screen {
  const b = term.buffer.active;
  const lines: string[] = [];
  const wrapped: boolean[] = [];
  const looks: string[] = [];
  const cell = b.getNullCell();
  for (let y = 0; y < term.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    lines.push((line?.translateToString(true) ?? '').trimEnd());
    // the top row may continue a row that scrolled off: nothing to reflow with, and not carried
    wrapped.push(y > 0 && line?.isWrapped === true);
    const row: string[] = [];
    for (let x = 0; x < term.cols; x++) if (line?.getCell(x, cell) !== undefined) row.push(look(cell));
    looks.push(row.join(' '));
  }
  return { buffer: b.type, cursor: { x: b.cursorX, y: b.cursorY }, lines, wrapped, looks };
}

/** A fresh terminal of the snapshot's size with the snapshot written to it. */
export async function replay(snapshot: { data: Uint8Array | string; cols: number; rows: number }): Promise<TerminalType> {
  const term = newTerminal(snapshot.cols, snapshot.rows);
  await write(term, snapshot.data);
  return term;
}
