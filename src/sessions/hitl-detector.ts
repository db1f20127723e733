/**
 * Human-in-the-loop prompt detection over a session's recent PTY output (spec 4.16).
 *
 * Method: keep the last {@link kHitlTailBytes} of raw output; when the output has been quiet for
 * a moment (hitl.ts), replay that tail into a small cursor model ({@link cursorLine}) — printable
 * text, CR, LF (scrolling at the real row count, never an assumed 24x80), BS, TAB, the cursor
 * moves and erases of ECMA-48/xterm (CUP, HVP, CUU..CHA, VPA, EL, ED, SU, SD, IND, RI, NEL,
 * save/restore, the alternate screen); every other escape sequence (colours, modes, OSC titles,
 * DCS strings) is skipped — and look at the cursor's row only: the text left of the cursor,
 * with nothing but blanks right of it. A prompt is pending exactly while the cursor sits after
 * it; once answered (the echo, or the newline of Enter) or scrolled away, it is not.
 *
 * Rules (first match wins; case-insensitive; the text left of the cursor, trimmed, must END
 * with the pattern):
 *   sudo        `[sudo] password for <user>:`
 *   password    `password:`, `Password (again):`, `Password for '…':`, `passphrase for key '…':`,
 *               `PIN:`, `passcode:`
 *   confirm     a choice like `[y/N]`, `[Y/n]`, `[y/n/q]`, `(yes/no)`, `(yes/no/[fingerprint])`,
 *               optionally followed by `?` or `:`; or a question ending in `?` whose sentence
 *               starts with Continue / Proceed / Are you sure / Do you want / Overwrite / Really /
 *               OK to
 *   press_enter `Press Enter …`, `Press RETURN …`, `Press any key …` (anything after it)
 * A rule list rather than a score: each rule is a pattern a user can predict, and shell prompts
 * (`$ `, `# `, `> `) match none of them.
 */
import type { HitlKind } from '../wire/sessions.js';

export interface HitlMatch {
  readonly kind: HitlKind;
  /** The prompt as displayed (trimmed, at most 240 characters). */
  readonly prompt: string;
}

/** Raw output bytes replayed into the cursor model (a full-screen redraw fits). */
export const kHitlTailBytes = 16 * 1024;
const kMaxPromptChars = 240;

const RULES: readonly (readonly [HitlKind, RegExp])[] = [
  ['sudo', /\[sudo\] password for [^:\s]{1,64}:$/i],
  ['password', /(?:\bpassword|\bpassphrase|\bpasscode|\bPIN)(?: \([^)\n]{0,20}\))?(?: for [^\n]{1,160}?)?:$/i],
  ['confirm', /\[\s*(?:y|yes)\s*\/\s*(?:n|no)\b[^\]\n]{0,32}\]\s*[?:]?$/i],
  ['confirm', /\(\s*(?:y|yes)\s*\/\s*(?:n|no)\b[^)\n]{0,32}\)\s*[?:]?$/i],
  ['confirm', /(?:^|[\s:,.!])(?:continue|proceed|are you sure|do you want|overwrite|really|ok to)\b[^\n]{0,200}\?$/i],
  ['press_enter', /\bpress\s+(?:enter|return|any key|<enter>|\[enter\])(?:\W[^\n]{0,120})?$/i],
];

// One token: a CSI (params, final), a string sequence (OSC/DCS/SOS/PM/APC, to BEL or ST or the
// end), another escape, one C0/DEL control, or a run of printable text.
const TOKEN =
  // eslint-disable-next-line no-control-regex
  /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b[\]PX^_][\s\S]*?(?:\x07|\x1b\\|$)|\x1b([ -/]*[0-~]?)|([\x00-\x1f\x7f])|([^\x00-\x1f\x7f\x1b]+)/gy;

type Row = string[];

interface Screen {
  rows: Map<number, Row>;
  row: number;
  col: number;
}

function num(params: string, i: number, dflt: number): number {
  const n = Number(params.replace(/^\?/, '').split(';')[i] ?? '');
  return Number.isInteger(n) && n > 0 ? n : dflt;
}

/**
 * The cursor's row of terminal output: text left of the cursor and right of it. `rows` is the
 * terminal's real height (for scrolling).
 */
export function cursorLine(raw: string, rows: number): { before: string; after: string } {
  const height = Math.max(1, Math.floor(rows));
  let s: Screen = { rows: new Map(), row: 0, col: 0 };
  let saved = { row: 0, col: 0 };
  let primary: Screen | undefined;
  const line = (): Row => {
    let r = s.rows.get(s.row);
    if (r === undefined) s.rows.set(s.row, (r = []));
    return r;
  };
  const scroll = (n: number): void => {
    const next = new Map<number, Row>();
    for (const [k, v] of s.rows) if (k - n >= 0 && k - n < height) next.set(k - n, v);
    s.rows = next;
  };
  const down = (n: number): void => {
    s.row += n;
    if (s.row >= height) {
      scroll(s.row - height + 1);
      s.row = height - 1;
    }
  };
  const clampRow = (r: number): number => Math.min(height - 1, Math.max(0, r));
  TOKEN.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = TOKEN.exec(raw)) !== null) {
    const [, params, final, esc, ctl, text] = m;
    if (text !== undefined) {
      const r = line();
      for (const ch of text) r[s.col++] = ch;
    } else if (ctl !== undefined) {
      if (ctl === '\r') s.col = 0;
      else if (ctl === '\n' || ctl === '\v' || ctl === '\f') down(1);
      else if (ctl === '\b') s.col = Math.max(0, s.col - 1);
      else if (ctl === '\t') s.col = (Math.floor(s.col / 8) + 1) * 8;
    } else if (final !== undefined) {
      const p = params ?? '';
      const n = num(p, 0, 1);
      switch (final) {
        case 'H':
        case 'f':
          s.row = clampRow(num(p, 0, 1) - 1);
          s.col = num(p, 1, 1) - 1;
          break;
        case 'A':
          s.row = clampRow(s.row - n);
          break;
        case 'B':
          s.row = clampRow(s.row + n);
          break;
        case 'C':
          s.col += n;
          break;
        case 'D':
          s.col = Math.max(0, s.col - n);
          break;
        case 'E':
          s.row = clampRow(s.row + n);
          s.col = 0;
          break;
        case 'F':
          s.row = clampRow(s.row - n);
          s.col = 0;
          break;
        case 'G':
          s.col = n - 1;
          break;
        case 'd':
          s.row = clampRow(n - 1);
          break;
        case 'K': {
          const mode = num(p, 0, 0);
          const r = line();
          if (mode === 0) r.length = Math.min(r.length, s.col);
          else if (mode === 1) for (let i = 0; i <= s.col && i < r.length; i++) r[i] = ' ';
          else s.rows.set(s.row, []);
          break;
        }
        case 'J': {
          const mode = num(p, 0, 0);
          if (mode === 0) {
            line().length = Math.min(line().length, s.col);
            for (const k of [...s.rows.keys()]) if (k > s.row) s.rows.delete(k);
          } else if (mode === 1) {
            for (const k of [...s.rows.keys()]) if (k < s.row) s.rows.delete(k);
          } else s.rows = new Map();
          break;
        }
        case 'S':
          scroll(n);
          break;
        case 'T': {
          const next = new Map<number, Row>();
          for (const [k, v] of s.rows) if (k + n < height) next.set(k + n, v);
          s.rows = next;
          break;
        }
        case 's':
          saved = { row: s.row, col: s.col };
          break;
        case 'u':
          s.row = saved.row;
          s.col = saved.col;
          break;
        case 'h':
        case 'l':
          if (/^\?(?:1049|1047|47)$/.test(p)) {
            if (final === 'h' && primary === undefined) {
              primary = s;
              s = { rows: new Map(), row: s.row, col: s.col };
            } else if (final === 'l' && primary !== undefined) {
              s = primary;
              primary = undefined;
            }
          }
          break;
      }
    } else if (esc !== undefined) {
      if (esc === '7') saved = { row: s.row, col: s.col };
      else if (esc === '8') {
        s.row = saved.row;
        s.col = saved.col;
      } else if (esc === 'D') down(1);
      else if (esc === 'E') {
        down(1);
        s.col = 0;
      } else if (esc === 'M') {
        if (s.row > 0) s.row--;
        else {
          const next = new Map<number, Row>();
          for (const [k, v] of s.rows) if (k + 1 < height) next.set(k + 1, v);
          s.rows = next;
        }
      } else if (esc === 'c') s = { rows: new Map(), row: 0, col: 0 };
    }
  }
  const r = s.rows.get(s.row) ?? [];
  const cells = Array.from(r, (c) => c ?? ' ');
  return { before: cells.slice(0, s.col).join(''), after: cells.slice(s.col).join('') };
}

/** The prompt the cursor sits after, if any rule matches. */
export function detectPrompt(raw: string, rows: number): HitlMatch | null {
  const { before, after } = cursorLine(raw, rows);
  if (after.trim() !== '') return null;
  const text = before.trim();
  if (text === '') return null;
  const tail = text.length > 400 ? text.slice(-400) : text;
  for (const [kind, re] of RULES) {
    if (re.test(tail)) return { kind, prompt: tail.length > kMaxPromptChars ? tail.slice(-kMaxPromptChars) : tail };
  }
  return null;
}

/** The bounded tail of one session's output. */
export class OutputTail {
  #chunks: Uint8Array[] = [];
  #bytes = 0;

  push(data: Uint8Array): void {
    if (data.byteLength === 0) return;
    this.#chunks.push(data);
    this.#bytes += data.byteLength;
    while (this.#chunks.length > 1 && this.#bytes - (this.#chunks[0]?.byteLength ?? 0) >= kHitlTailBytes) {
      this.#bytes -= this.#chunks.shift()?.byteLength ?? 0;
    }
    // Many tiny chunks (keystroke echo) would make shift() quadratic: fold them into one now and then.
    if (this.#chunks.length > 256) {
      const all = Buffer.concat(this.#chunks);
      const keep = all.subarray(Math.max(0, all.byteLength - 2 * kHitlTailBytes));
      this.#chunks = [keep];
      this.#bytes = keep.byteLength;
    }
  }

  get bytes(): number {
    return this.#bytes;
  }

  /**
   * The last ≤ kHitlTailBytes bytes as text. When older output was cut off, the text starts at
   * the first line break or escape after the cut, so a half sequence is never read as text.
   */
  text(): string {
    const all = Buffer.concat(this.#chunks);
    if (all.byteLength <= kHitlTailBytes) return all.toString('utf8');
    const t = all.subarray(all.byteLength - kHitlTailBytes).toString('utf8');
    // eslint-disable-next-line no-control-regex
    const start = t.search(/[\n\x1b]/);
    return start < 0 ? '' : t.slice(start);
  }

  clear(): void {
    this.#chunks = [];
    this.#bytes = 0;
  }
}
