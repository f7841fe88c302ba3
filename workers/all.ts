// First, before anything that loads http, pg or ioredis: the instrumentations patch them as they load.
import { startTracing } from '../src/lib/tracing';
startTracing('worker', ['all']);

import { QUEUE_NAMES } from '../src/queues/catalogue';
import { runWorkerProcess } from './process';

runWorkerProcess(QUEUE_NAMES);
