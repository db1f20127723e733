/**
 * Entry of the dashboard bundle (built by src/dashboard/build.ts). The stylesheets are imported
 * here so esbuild emits one CSS file for the first render; xterm.js's own code loads only with
 * the terminal view.
 */
import './styles.css';
import '@xterm/xterm/css/xterm.css';
import { startApp } from './app.js';
import type { AppContext } from './context.js';

declare global {
  interface Window {
    /** Test and benchmark hooks (see README of the dashboard tests): the live app context. */
    __sandboxd?: AppContext;
  }
}

const root = document.getElementById('app');
if (root !== null) window.__sandboxd = startApp(root);
