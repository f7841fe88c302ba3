// First, before anything that loads http, pg or ioredis: the instrumentations patch them as they load.
import { startTracing } from '../src/lib/tracing';
startTracing('worker', ['usage']);

import { runWorkerProcess } from './process';

runWorkerProcess(['usage']);
