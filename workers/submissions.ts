import { runWorkerProcess } from './process';

runWorkerProcess(['submissions']);
