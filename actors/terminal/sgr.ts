/** SGR (Select Graphic Rendition) parameters from xterm.js cell attributes. */
import type { IBufferCell } from '@xterm/headless';

/** What SGR sets: a buffer cell and xterm's current attributes both have these. */
export type Attributes = Pick<
  IBufferCell,
  | 'isBold'
  | 'isDim'
  | 'isItalic'
  | 'isUnderline'
  | 'isBlink'
  | 'isInverse'
  | 'isInvisible'
  | 'isStrikethrough'
  | 'isOverline'
  | 'isFgDefault'
  | 'isFgRGB'
  | 'getFgColor'
  | 'isBgDefault'
  | 'isBgRGB'
  | 'getBgColor'
>;

/** Parameters that set exactly these attributes from any state: a reset (0), then each one. */
export function sgrOf(a: Attributes): string {
  const p = ['0'];
  if (a.isBold()) p.push('1');
  if (a.isDim()) p.push('2');
  if (a.isItalic()) p.push('3');
  if (a.isUnderline()) p.push('4');
  if (a.isBlink()) p.push('5');
  if (a.isInverse()) p.push('7');
  if (a.isInvisible()) p.push('8');
  if (a.isStrikethrough()) p.push('9');
  if (a.isOverline()) p.push('53');
  if (!a.isFgDefault()) p.push(colourParams(38, a.isFgRGB(), a.getFgColor()));
  if (!a.isBgDefault()) p.push(colourParams(48, a.isBgRGB(), a.getBgColor()));
  return p.join(';');
}

/** A colour's parameters: `base` 38 foreground, 48 background; the 16-colour codes for 0..15. */
export function colourParams(base: 38 | 48, isRgb: boolean, colour: number): string {
  if (isRgb) return `${base};2;${(colour >>> 16) & 0xff};${(colour >>> 8) & 0xff};${colour & 0xff}`;
  if (colour >= 16) return `${base};5;${colour}`;
  const first = base === 38 ? 30 : 40;
  return String(colour >= 8 ? first + 60 + (colour - 8) : first + colour);
}
