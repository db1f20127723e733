/**
 * A faster line feed at the bottom of a scroll region for the headless terminals of the screen
 * states (session-screen.ts).
 *
 * The pinned @xterm/headless (6.0) scrolls a region that does not start at the top row (a TUI's
 * status line above its scrolling area: DECSTBM `CSI 2;N r`) by shifting the region's rows up one
 * and putting a *fresh copy* of a blank row at its bottom: an array of 3 words per cell allocated
 * for every line feed, while the row shifted out of the region is dropped. A program streaming
 * lines into a region made the emulator, and with it every keyframe of its session, about four
 * times slower than the same lines on a whole-screen scroll (19 against 72 MB/s of 100-column
 * lines, most of it copying and collecting those rows; a whole-screen scroll reuses the row that
 * leaves the screen). Here the region's scroll reuses the row it shifts out in the same way, and
 * leaves everything else (a region at the top, the scrollback, the cursor and the viewport) to
 * xterm's own method.
 *
 * What it relies on is xterm's internal BufferService (`_core._bufferService`: its `buffer` with
 * `ybase`, `scrollTop`, `scrollBottom` and a `lines` list with get/set/shiftElements; its
 * `_cachedBlankLine`, `isUserScrolling` and `_onScroll`; rows with `copyFrom`) of the version in
 * package-lock.json. When any of it is missing, nothing is changed and xterm's own scroll runs: the
 * terminal is then slower, never wrong. test/unit/terminal/region-scroll.test.ts checks that the
 * pinned version is changed, and that the screens are the same as unchanged xterm's.
 */
import type { Terminal } from '@xterm/headless';

interface Row {
  isWrapped: boolean;
  readonly length: number;
  getFg(index: number): number;
  getBg(index: number): number;
  copyFrom(row: Row): void;
}

interface Buffer {
  readonly ybase: number;
  ydisp: number;
  readonly scrollTop: number;
  readonly scrollBottom: number;
  readonly lines: {
    get(index: number): Row | undefined;
    set(index: number, row: Row): void;
    shiftElements(start: number, count: number, offset: number): void;
  };
  getBlankLine(attr: { fg: number; bg: number }, isWrapped?: boolean): Row;
}

interface BufferService {
  readonly buffer: Buffer;
  readonly cols: number;
  readonly isUserScrolling: boolean;
  _cachedBlankLine?: Row;
  readonly _onScroll: { fire(ydisp: number): void };
  scroll(eraseAttr: { fg: number; bg: number }, isWrapped?: boolean): void;
}

/** Makes `term` scroll regions without allocating a row per line feed; false when its internals are not the expected ones. */
export function installRegionScroll(term: Terminal): boolean {
  const service = (term as unknown as { _core?: { _bufferService?: BufferService } })._core?._bufferService;
  if (service === undefined || typeof service.scroll !== 'function' || typeof service._onScroll?.fire !== 'function') return false;
  const probe = service.buffer;
  const row = probe?.lines?.get(0);
  if (
    typeof probe?.scrollTop !== 'number' ||
    typeof probe.lines.shiftElements !== 'function' ||
    typeof probe.lines.set !== 'function' ||
    typeof probe.getBlankLine !== 'function' ||
    typeof row?.copyFrom !== 'function'
  )
    return false;
  const xtermScroll = service.scroll.bind(service);
  service.scroll = function regionScroll(this: BufferService, eraseAttr, isWrapped = false): void {
    const buffer = this.buffer;
    if (buffer.scrollTop === 0) return xtermScroll(eraseAttr, isWrapped);
    // The blank row xterm keeps for the erase colours (as its own scroll does).
    let blank = this._cachedBlankLine;
    if (blank === undefined || blank.length !== this.cols || blank.getFg(0) !== eraseAttr.fg || blank.getBg(0) !== eraseAttr.bg) {
      blank = buffer.getBlankLine(eraseAttr, isWrapped);
      this._cachedBlankLine = blank;
    }
    blank.isWrapped = isWrapped;
    const top = buffer.ybase + buffer.scrollTop;
    const bottom = buffer.ybase + buffer.scrollBottom;
    const leaving = buffer.lines.get(top);
    if (leaving === undefined) return xtermScroll(eraseAttr, isWrapped);
    buffer.lines.shiftElements(top + 1, bottom - top, -1);
    leaving.copyFrom(blank);
    buffer.lines.set(bottom, leaving);
    if (!this.isUserScrolling) buffer.ydisp = buffer.ybase;
    this._onScroll.fire(buffer.ydisp);
  };
  return true;
}
