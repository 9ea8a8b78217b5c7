// A worker thread's entry for a TypeScript module of the benches. Node 20 does not run the parent's
// `--import tsx` in worker threads (Node 22 does), so a worker started on a .ts file fails there with
// "Unknown file extension .ts": this entry registers tsx's loader in the worker, then imports the module.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

if (Number(process.versions.node.split('.')[0]) < 22) register();
await import(workerData.entry);
