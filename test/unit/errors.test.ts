import { expect } from 'chai';
import { dependencyFailure, unexpectedError } from '../../src/http/errors';
import { replicaFailure } from '../../src/http/pipeline';

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

describe('dependencyFailure', () => {
  it('names how a dependency failed (the reason a replica read is tried on the primary), or null for a fault of the code', () => {
    const cases: Array<[unknown, string | null]> = [
      [pgError('40001', 'canceling statement due to conflict with recovery'), 'conflict'],
      [pgError('40P01', 'canceling statement due to conflict with recovery'), 'conflict'],
      [pgError('57014', 'canceling statement due to statement timeout'), 'cancelled'],
      [pgError('57014', 'canceling statement due to user request'), 'cancelled'],
      [pgError('55P03', 'canceling statement due to lock timeout'), 'cancelled'],
      [pgError('57P01', 'terminating connection due to administrator command'), 'unavailable'],
      [pgError('53300', 'sorry, too many clients already'), 'unavailable'],
      [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5433'), { code: 'ECONNREFUSED' }), 'unavailable'],
      [new Error('Connection terminated unexpectedly'), 'unavailable'],
      [new Error('Query read timeout'), 'unavailable'],
      [Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' }), 'unavailable'],
      [pgError('23505', 'duplicate key value violates unique constraint'), null],
      [pgError('25006', 'cannot execute INSERT in a read-only transaction'), null],
      [new TypeError('x is undefined'), null],
      [undefined, null],
    ];
    for (const [err, reason] of cases) expect(dependencyFailure(err), String((err as Error | undefined)?.message)).to.equal(reason);
  });
});

describe('replicaFailure', () => {
  it('adds to the dependency failures a replica that has not replayed the schema the release reads (behind); a fault of the code stays null', () => {
    const cases: Array<[unknown, string | null]> = [
      [pgError('42P01', 'relation "submission_month_counts" does not exist'), 'behind'],
      [pgError('42703', 'column "form_version" does not exist'), 'behind'],
      [pgError('42883', 'function pg_snapshot_xmin(text) does not exist'), 'behind'],
      [pgError('40001', 'canceling statement due to conflict with recovery'), 'conflict'],
      [pgError('23505', 'duplicate key value violates unique constraint'), null],
      [new TypeError('x is undefined'), null],
    ];
    for (const [err, reason] of cases) expect(replicaFailure(err), String((err as Error).message)).to.equal(reason);
  });
});
