import { expect } from 'chai';
import { auditMigration, contractOf, upSql, type Finding } from '../upgrade/migration-rules';
import { migrationSource, migrationsAt, migrationsHere, previousRelease, releaseUses } from '../upgrade/release';

const wrap = (sql: string, extra = '') => `import { Migration } from '@mikro-orm/migrations';
export class Migration20990101000000_x extends Migration {${extra}
  override async up(): Promise<void> { this.addSql(\`${sql}\`); }
  override async down(): Promise<void> { this.addSql('drop table if exists everything;'); }
}`;
const whats = (findings: Finding[]) => findings.map((f) => f.what);

/** Expand, then contract (src/README.md, "Writing a migration"). */
describe('migration rules', () => {
  it('refuses drops and renames of tables, columns and functions, type changes and unchecked not nulls', () => {
    expect(whats(auditMigration(wrap('drop function if exists store_submission(text, text);')))).to.deep.equal(['drop function store_submission']);
    expect(whats(auditMigration(wrap('alter table submissions drop column if exists language;')))).to.deep.equal(['drop column language']);
    expect(whats(auditMigration(wrap('alter table submissions rename to submissions_old;')))).to.deep.equal(['rename table submissions to submissions_old']);
    expect(whats(auditMigration(wrap('alter table forms rename column name to title;')))).to.deep.equal(['rename column name to title']);
    expect(whats(auditMigration(wrap('alter table forms alter column name type varchar(40);')))).to.deep.equal(['change the type of column name']);
    expect(whats(auditMigration(wrap('alter table submissions alter column language set not null;'))))
      .to.deep.equal(['set not null on column language without a validated check in an earlier migration']);
    expect(auditMigration(wrap('alter table submissions alter column language set not null;'),
      upSql(wrap('alter table submissions add constraint language_nn check (language is not null) not valid; alter table submissions validate constraint language_nn;')))).to.deep.equal([]);
    expect(whats(auditMigration(wrap('alter table submissions add column form_version integer not null;'))))
      .to.deep.equal(["add column form_version not null without a default (the previous release's inserts fail)"]);
  });

  it('refuses statements that hold a big table locked while they scan it', () => {
    expect(whats(auditMigration(wrap('create index submissions_language_idx on submissions (language);'))))
      .to.deep.equal(['create index on existing table submissions without concurrently']);
    expect(whats(auditMigration(wrap('create index concurrently if not exists submissions_language_idx on submissions (language);'))))
      .to.deep.equal(['concurrently in a transactional migration (override isTransactional() to return false)']);
    expect(auditMigration(wrap('create index concurrently if not exists s_idx on submissions (language);',
      '\n  override isTransactional(): boolean { return false; }'))).to.deep.equal([]);
    expect(whats(auditMigration(wrap('drop index if exists outbox_pending_idx;'))))
      .to.deep.equal(['drop index outbox_pending_idx without concurrently', 'drop index outbox_pending_idx']);
    expect(whats(auditMigration(wrap('alter table outbox add constraint o_fk foreign key (organization_id) references organizations(id);'))))
      .to.deep.equal(['add a check or foreign key to existing table outbox without not valid (scans it under lock)']);
    expect(whats(auditMigration(wrap('lock table submissions in exclusive mode;')))).to.deep.equal(['lock table submissions']);
    // a configuration table's lock taken first, to order a step's locks as the service's statements do
    expect(auditMigration(wrap('lock table forms in access exclusive mode; alter table submissions drop constraint if exists s_fkey;'))).to.deep.equal([]);
    // but not a traffic table locked beside it in the same statement, nor with `table` or `only` left out or put in
    expect(whats(auditMigration(wrap('lock table forms, submissions in access exclusive mode;')))).to.deep.equal(['lock table submissions']);
    expect(whats(auditMigration(wrap('lock forms, only submission_changes;')))).to.deep.equal(['lock table submission_changes']);
    expect(whats(auditMigration(wrap('lock table only "submissions" nowait;')))).to.deep.equal(['lock table submissions']);
    expect(whats(auditMigration(wrap('truncate table outbox;')))).to.deep.equal(['truncate table outbox']);
    // a trigger on truncate truncates nothing when it is created
    expect(auditMigration(wrap(`create or replace trigger f_truncate after truncate on forms for each statement execute function f();
create trigger g before insert or truncate on outbox for each statement execute function g();`))).to.deep.equal([]);
  });

  it('refuses dropping an index, even concurrently, unless the migration builds it itself (a failed attempt\'s leftover)', () => {
    const concurrently = '\n  override isTransactional(): boolean { return false; }';
    expect(auditMigration(wrap('drop index concurrently if exists webhook_deliveries_owed_idx;', concurrently)))
      .to.deep.equal([{ kind: 'destructive', what: 'drop index webhook_deliveries_owed_idx', object: 'webhook_deliveries_owed_idx' }]);
    expect(auditMigration(wrap(`drop index concurrently if exists d_created_idx;
create index concurrently d_created_idx on webhook_deliveries (created_at);`, concurrently))).to.deep.equal([]);
  });

  it('lets expand steps through: new tables and their indexes, nullable or defaulted columns, not valid checks, function bodies', () => {
    const expand = wrap(`create table if not exists form_versions (id text primary key, form_id text not null);
create index form_versions_form_idx on form_versions (form_id);
alter table submissions add column if not exists language text, add column if not exists form_version integer;
alter table outbox add column relay_attempts integer not null default 0;
alter table webhooks add column if not exists throttle_rate integer check (throttle_rate between 1 and 10000);
alter table submissions add constraint language_nn check (language is not null) not valid;
create index if not exists submissions_language_idx on only submissions (language);
-- drop table submissions (a comment)
create or replace function f() returns void language plpgsql as $$ begin execute 'drop table x'; end $$;`);
    expect(auditMigration(expand)).to.deep.equal([]);
  });

  it('reads the contract marker', () => {
    expect(contractOf(wrap('drop function f();', '\n  /** @contract-of Migration20261123004000_store_submission_function */'))).to.equal('Migration20261123004000_store_submission_function');
    expect(contractOf(wrap('drop function f();'))).to.equal(null);
  });

  it('every migration newer than the release this one replaces (UPGRADE_FROM) is an expand, or the contract of an expand that shipped', function () {
    this.timeout(20_000);
    const from = previousRelease();
    const shipped = migrationsAt(from);
    const here = migrationsHere();
    const newer = here.filter((name) => !shipped.includes(name));
    const refusals: string[] = [];
    const earlier: string[] = [];
    for (const name of here) {
      const source = migrationSource(name);
      if (newer.includes(name)) {
        const contract = contractOf(source);
        for (const finding of auditMigration(source, earlier.join('\n'))) {
          const allowed = finding.kind === 'destructive' && contract !== null && shipped.includes(contract)
            && !(finding.object && releaseUses(from, finding.object));
          if (!allowed) {
            const why = contract === null ? '' : shipped.includes(contract)
              ? ` (contract of ${contract}, but the release ${from.slice(0, 10)} still uses ${finding.object}, or the step blocks)`
              : ` (contract of ${contract}, which ${from.slice(0, 10)} did not ship)`;
            refusals.push(`${name}: ${finding.what}${why}`);
          }
        }
      }
      earlier.push(upSql(source));
    }
    expect(refusals, `upgrading from ${from}`).to.deep.equal([]);
  });
});
