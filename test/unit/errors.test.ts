import { expect } from 'chai';
import { unexpectedError } from '../../src/http/errors';

/** An error as node-postgres raises it (MikroORM's exceptions copy its fields). */
const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'ERROR' });

describe('unexpectedError', () => {
  it('answers 503 with Retry-After for a statement a conflict with recovery or a deadlock ended: run again, it may well succeed', () => {
    for (const err of [
      pgError('40001', 'canceling statement due to conflict with recovery'),
      pgError('40P01', 'canceling statement due to conflict with recovery'),
      pgError('40P01', 'deadlock detected'),
    ]) {
      const answer = unexpectedError(err);
      expect(answer.status, err.code).to.equal(503);
      expect(answer.code).to.equal('service_unavailable');
      expect(Number(answer.headers['Retry-After'])).to.be.greaterThan(0);
    }
  });

  it('answers 500 for what the code did wrong', () => {
    for (const err of [pgError('23505', 'duplicate key value violates unique constraint'), pgError('42P01', 'relation does not exist'), new TypeError('x is undefined')]) {
      expect(unexpectedError(err).status, err.message).to.equal(500);
    }
  });
});
