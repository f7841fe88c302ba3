import { QUEUE_NAMES } from '../src/queues/catalogue';
import { runWorkerProcess } from './process';

runWorkerProcess(QUEUE_NAMES);
