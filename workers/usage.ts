import { runWorkerProcess } from './process';

runWorkerProcess(['usage']);
