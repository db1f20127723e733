/**
 * Entry of the screen-states worker (loaded by URL from screen-states.ts, never imported): one
 * headless terminal per session, fed the messages of screen-protocol.ts in the order they come.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { ToScreenWorker, ScreenWorkerData } from './screen-protocol.js';
import { ScreenBook } from './screen-book.js';

if (parentPort === null) throw new Error('screen-states.worker must run in a worker thread');
const port = parentPort;
const book = new ScreenBook(workerData as ScreenWorkerData, (msg, transfer) => port.postMessage(msg, transfer));
port.on('message', (msg: ToScreenWorker) => book.handle(msg));
