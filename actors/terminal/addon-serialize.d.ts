// The ESM build of @xterm/addon-serialize, imported by its path: the package's own typings are
// written against @xterm/xterm, whose typings pull DOM's lib into the whole program (and break
// Node's WebCrypto types in src/identity). This restates the part used here against
// @xterm/headless; NodeNext finds no .d.mts beside the .mjs, so it takes this declaration.
declare module '@xterm/addon-serialize/lib/addon-serialize.mjs' {
  import type { ITerminalAddon, Terminal } from '@xterm/headless';

  export interface ISerializeOptions {
    /** Rows above the screen to include (all when absent). */
    scrollback?: number;
    /** Leave out the DEC private and ANSI modes (default false). */
    excludeModes?: boolean;
    /** Leave out the alternate screen when it is active (default false). */
    excludeAltBuffer?: boolean;
  }

  export class SerializeAddon implements ITerminalAddon {
    activate(terminal: Terminal): void;
    serialize(options?: ISerializeOptions): string;
    dispose(): void;
  }
}
