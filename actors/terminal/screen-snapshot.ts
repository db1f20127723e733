/**
 * One terminal's screen as `vt100-screen-state-v1` text: VT sequences that, written to a reset
 * terminal of the same size, redraw the visible screen (and the alternate screen when it is the
 * active one), the cursor position, the current SGR attributes and the modes that change how the
 * next bytes or the user's keys and mouse are handled.
 *
 * The cells come from xterm.js's serialize addon, with the repairs of addon-repairs.ts. The rest
 * is written here, because the addon gets it wrong for a keyframe or has no field for it:
 * - with the alternate screen active, the addon enters it with the current SGR still set, so the
 *   alternate screen would be cleared in that colour and drawn with the wrong attributes;
 * - the addon places the cursor with relative moves, one column off after a drawing that ended in
 *   the last column: the cursor is placed with an absolute CUP, after the modes (the scroll region
 *   and origin mode home it); a cursor past the last column (the next character wraps) is made by
 *   writing the character before it again, before the modes (insert mode and the character set
 *   would change what that writes);
 * - modes: the addon's, and the scroll region, a hidden cursor, the mouse report encoding and the
 *   DEC line drawing character set, which it leaves out.
 * Not carried: the saved cursor (DECSC), tab stops, the window title, underline styles and colours,
 * the normal screen's coloured empty rows while the alternate screen is shown, and a cursor past
 * the last column while a scroll region or origin mode is set (it lands in the last column).
 *
 * Several of these read xterm.js internals (of the pinned @xterm/headless); each is skipped when
 * its field is missing, and the tests fail when an upgrade moves one.
 */
import type { Terminal } from '@xterm/headless';
import type { SerializeAddon } from '@xterm/addon-serialize/lib/addon-serialize.mjs';
import { eraseEmptyWrappedRows, paintErasedColour, rewrap, withBlankContinuationsUnwrapped } from './addon-repairs.js';
import { sgrOf, type Attributes } from './sgr.js';

const kEnterAltScreen = '\x1b[?1049h\x1b[H';

/** The xterm.js internals read here (all optional: a missing one skips its extra). */
interface XtermInternals {
  readonly _core?: {
    readonly coreService?: { readonly isCursorHidden?: unknown };
    readonly coreMouseService?: { readonly activeEncoding?: unknown };
    readonly _charsetService?: { readonly glevel?: unknown; readonly charset?: unknown; readonly _charsets?: unknown };
    readonly _bufferService?: { readonly buffer?: { readonly scrollTop?: unknown; readonly scrollBottom?: unknown } };
    /** The SGR state the next character is written with (the addon reads it too). */
    readonly _inputHandler?: { readonly _curAttrData?: Partial<Attributes> };
  };
}

/** The screen of `term` (its pending writes already parsed) as `vt100-screen-state-v1` text. */
export function serializeScreen(term: Terminal, addon: SerializeAddon): string {
  const { normal, active } = term.buffer;
  return withBlankContinuationsUnwrapped(term, (hidden) => {
    const cells = addon.serialize({ scrollback: 0, excludeModes: true });
    if (active.type === 'normal') return `${paintErasedColour(normal, term.rows)}${cells}${afterCells(term, hidden.normal)}`;
    // The normal screen part cannot contain the marker: cells hold no control characters.
    const at = cells.indexOf(kEnterAltScreen);
    const normalCells = at < 0 ? cells : cells.slice(0, at);
    const altCells = at < 0 ? '' : cells.slice(at + kEnterAltScreen.length);
    // Back to the normal cursor before entering: the alternate screen saves it for the way out.
    const normalCursor = `\x1b[${normal.cursorY + 1};${Math.min(normal.cursorX, term.cols - 1) + 1}H`;
    const normalRewrap = hidden.normal.length === 0 ? '' : `${rewrap(normal, term.cols, hidden.normal)}${normalCursor}`;
    return (
      `${paintErasedColour(normal, term.rows)}${normalCells}${normalRewrap}\x1b[m${kEnterAltScreen}` +
      `${paintErasedColour(active, term.rows)}${altCells}${afterCells(term, hidden.alternate)}`
    );
  });
}

/**
 * What follows the active screen's cells: wrap repairs, modes, character sets, scroll region,
 * cursor position and visibility, current SGR. `hiddenWraps`: rows to wrap again (addon-repairs.ts).
 */
function afterCells(term: Terminal, hiddenWraps: readonly number[]): string {
  const core = (term as unknown as XtermInternals)._core;
  const current = core?._inputHandler?._curAttrData;
  const attrs = current !== undefined && typeof current.isBold === 'function' ? (current as Attributes) : undefined;
  const m = term.modes;
  const buffer = core?._bufferService?.buffer;
  const top = typeof buffer?.scrollTop === 'number' ? buffer.scrollTop : 0;
  const bottom = typeof buffer?.scrollBottom === 'number' ? buffer.scrollBottom : term.rows - 1;
  const region = top !== 0 || bottom !== term.rows - 1;
  let out = '';
  // While the defaults still hold (no insert mode, ASCII, no region): fixes and a pending wrap.
  const active = term.buffer.active;
  if (attrs !== undefined) out += `\x1b[m${eraseEmptyWrappedRows(active, term.cols, term.rows)}${rewrap(active, term.cols, hiddenWraps)}`;
  const wrapped = attrs !== undefined && !region && !m.originMode ? pendingWrap(term) : '';
  out += wrapped;
  if (m.applicationCursorKeysMode) out += '\x1b[?1h';
  if (m.applicationKeypadMode) out += '\x1b=';
  if (m.bracketedPasteMode) out += '\x1b[?2004h';
  if (m.insertMode) out += '\x1b[4h';
  if (m.reverseWraparoundMode) out += '\x1b[?45h';
  if (m.sendFocusMode) out += '\x1b[?1004h';
  if (!m.wraparoundMode) out += '\x1b[?7l';
  const mouse = { none: '', x10: '\x1b[?9h', vt200: '\x1b[?1000h', drag: '\x1b[?1002h', any: '\x1b[?1003h' }[m.mouseTrackingMode];
  out += mouse;
  const encoding = core?.coreMouseService?.activeEncoding;
  if (mouse !== '' && encoding === 'SGR') out += '\x1b[?1006h';
  if (mouse !== '' && encoding === 'SGR_PIXELS') out += '\x1b[?1016h';
  out += charsets(core?._charsetService);
  // DECSTBM and DECOM home the cursor; CUP then counts rows from the region's top in origin mode.
  if (region) out += `\x1b[${top + 1};${bottom + 1}r`;
  if (m.originMode) out += '\x1b[?6h';
  if (wrapped === '') {
    out += `\x1b[${active.cursorY - (m.originMode ? top : 0) + 1};${Math.min(active.cursorX, term.cols - 1) + 1}H`;
  }
  if (attrs !== undefined) out += `\x1b[${sgrOf(attrs)}m`;
  if (core?.coreService?.isCursorHidden === true) out += '\x1b[?25l';
  return out;
}

/**
 * A cursor past the last column (the next character wraps), which no CUP reaches, made by writing
 * the character before it again with its own attributes; '' when the cursor is not there.
 */
function pendingWrap(term: Terminal): string {
  const active = term.buffer.active;
  if (active.cursorX < term.cols) return '';
  const line = active.getLine(active.baseY + active.cursorY);
  let x = term.cols - 1;
  let cell = line?.getCell(x);
  // the last column holding the right half of a wide character: write the whole character
  if (cell?.getWidth() === 0 && x > 0) cell = line?.getCell(--x);
  if (cell === undefined) return '';
  return `\x1b[${active.cursorY + 1};${x + 1}H\x1b[${sgrOf(cell)}m${cell.getChars() || ' '}`;
}

/**
 * The character sets: the one in use (`charset`, which DECRC can set apart from the designations)
 * as G0 or, shifted out, G1, and the other designation when it is DEC Special Graphics.
 */
function charsets(service: { readonly glevel?: unknown; readonly charset?: unknown; readonly _charsets?: unknown } | undefined): string {
  if (service === undefined || !Array.isArray(service._charsets)) return '';
  const sets = service._charsets as unknown[];
  // The DEC Special Graphics table maps 'q' to a horizontal line; ASCII (B) is no table at all.
  const isLineDrawing = (set: unknown): boolean => typeof set === 'object' && set !== null && (set as Record<string, unknown>)['q'] === '─';
  const shifted = service.glevel === 1;
  let out = '';
  if (isLineDrawing(shifted ? sets[0] : service.charset)) out += '\x1b(0';
  if (isLineDrawing(shifted ? service.charset : sets[1])) out += '\x1b)0';
  if (shifted) out += '\x0e';
  return out;
}
