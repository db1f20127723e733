/**
 * The one place that loads @unraid/libvirt, lazily and only on the main thread.
 *
 * The addon keeps a process-wide static reference to its Domain constructor (src/domain.cc,
 * `Domain::constructor`), overwritten by every thread that loads it: once a worker thread has
 * loaded the addon, the next domain list on the main thread dereferences a handle of the other
 * thread and V8 aborts the whole process ("Cannot create a handle without a HandleScope").
 * So the hypervisor port lives on the main thread; actors in worker shards reach it by message.
 */
import { isMainThread } from 'node:worker_threads';
import type * as LibvirtBinding from '@unraid/libvirt';

type Binding = typeof LibvirtBinding;

let loading: Promise<Binding> | null = null;

export function loadBinding(): Promise<Binding> {
  if (!isMainThread) {
    return Promise.reject(new Error('@unraid/libvirt may only be loaded on the main thread (it is not safe in worker threads)'));
  }
  loading ??= import('@unraid/libvirt');
  return loading;
}
