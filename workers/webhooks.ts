import { runWorkerProcess } from './process';

runWorkerProcess(['webhooks']);
