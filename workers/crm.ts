import { runWorkerProcess } from './process';

runWorkerProcess(['crm']);
