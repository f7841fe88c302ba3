/**
 * Expand, then contract (src/README.md, "Writing a migration"): the rules a migration must follow so
 * that the previous release keeps working on the migrated schema while both run side by side
 * (deploy/README.md, "Upgrading"). Pure: reads a migration's source text, says what it refuses.
 */

/** Tables that grow with configuration (a row per customer, form or webhook), not with traffic. */
export const SMALL_TABLES = new Set([
  'system_settings', 'organizations', 'api_keys', 'forms', 'form_pages', 'form_fields', 'webhooks', 'usage_rollups',
]);

/** The marker of a contract step: `@contract-of Migration<timestamp>_<name>`, naming the expand it completes. */
export const CONTRACT_MARKER = /@contract-of\s+(Migration\d{14}_\w+)/;

export type FindingKind = 'destructive' | 'blocking';

export interface Finding {
  kind: FindingKind;
  /** What the statement does, e.g. `drop function store_submission`. */
  what: string;
  /** The table, column or function it touches (for the previous release's usage check). */
  object?: string;
}

/** The SQL the migration's `up()` runs, without comments and function bodies, lower case, one space. */
export function upSql(source: string): string {
  const start = source.search(/async\s+up\s*\(/);
  const end = source.search(/async\s+down\s*\(/);
  let text = source.slice(start < 0 ? 0 : start, end > start ? end : undefined);
  text = text.replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/(^|[^:'"`])\/\/[^\n]*/g, '$1 ')
    .replace(/--[^\n]*/g, ' ')
    // A function body is code the function runs later, not DDL the migration runs now.
    .replace(/\$(\w*)\$[\s\S]*?\$\1\$/g, ' $$body$$ ');
  return text.toLowerCase().replace(/\s+/g, ' ');
}

const NAME = '"?([a-z_][a-z0-9_]*)"?';

function tablesCreated(sql: string): Set<string> {
  return new Set([...sql.matchAll(new RegExp(`create table (?:if not exists )?${NAME}`, 'g'))].map((m) => m[1]));
}

function indexesCreated(sql: string): Set<string> {
  return new Set([...sql.matchAll(new RegExp(`create (?:unique )?index (?:concurrently )?(?:if not exists )?${NAME} on`, 'g'))].map((m) => m[1]));
}

/**
 * Every statement of a migration that the previous release could not live with (`destructive`) or
 * that holds a lock blocking its traffic for as long as a table is scanned (`blocking`).
 * `earlierSql` is the `upSql` of every earlier migration (to find a validated check before a `not null`).
 */
export function auditMigration(source: string, earlierSql = ''): Finding[] {
  const sql = upSql(source);
  const findings: Finding[] = [];
  const created = tablesCreated(sql);
  const indexes = indexesCreated(sql);
  const existingBig = (table: string) => !created.has(table) && !SMALL_TABLES.has(table);

  for (const m of sql.matchAll(new RegExp(`drop (table|view|materialized view|function|procedure|type|trigger|sequence|schema) (?:if exists )?${NAME}`, 'g'))) {
    findings.push({ kind: 'destructive', what: `drop ${m[1]} ${m[2]}`, object: m[2] });
  }
  for (const m of sql.matchAll(new RegExp(`drop column (?:if exists )?${NAME}`, 'g'))) {
    findings.push({ kind: 'destructive', what: `drop column ${m[1]}`, object: m[1] });
  }
  for (const m of sql.matchAll(new RegExp(`alter (table|function|procedure|view) (?:if exists )?(?:only )?${NAME}[^;]*? rename to ${NAME}`, 'g'))) {
    findings.push({ kind: 'destructive', what: `rename ${m[1]} ${m[2]} to ${m[3]}`, object: m[2] });
  }
  for (const m of sql.matchAll(new RegExp(`rename column ${NAME} to ${NAME}`, 'g'))) {
    findings.push({ kind: 'destructive', what: `rename column ${m[1]} to ${m[2]}`, object: m[1] });
  }
  for (const m of sql.matchAll(new RegExp(`alter column ${NAME} (?:set data )?type `, 'g'))) {
    findings.push({ kind: 'destructive', what: `change the type of column ${m[1]}`, object: m[1] });
  }
  for (const m of sql.matchAll(new RegExp(`alter column ${NAME} set not null`, 'g'))) {
    const checked = earlierSql.includes(`${m[1]} is not null`) && earlierSql.includes('validate constraint');
    if (!checked) findings.push({ kind: 'destructive', what: `set not null on column ${m[1]} without a validated check in an earlier migration`, object: m[1] });
  }
  for (const m of sql.matchAll(new RegExp(`add column (?:if not exists )?${NAME} ([^,;]*)`, 'g'))) {
    if (/\bnot null\b/.test(m[2]) && !/\bdefault\b/.test(m[2]) && !/\bgenerated\b/.test(m[2])) {
      findings.push({ kind: 'destructive', what: `add column ${m[1]} not null without a default (the previous release's inserts fail)`, object: m[1] });
    }
  }
  // `on only` a partitioned table builds nothing (the partitions' indexes, built concurrently, are attached to it).
  for (const m of sql.matchAll(new RegExp(`create (?:unique )?index (concurrently )?(?:if not exists )?(?:${NAME} )?on (only )?${NAME}`, 'g'))) {
    if (!m[1] && !m[3] && existingBig(m[4])) findings.push({ kind: 'blocking', what: `create index on existing table ${m[4]} without concurrently`, object: m[4] });
  }
  for (const m of sql.matchAll(new RegExp(`drop index (concurrently )?(?:if exists )?${NAME}`, 'g'))) {
    if (!m[1]) findings.push({ kind: 'blocking', what: `drop index ${m[2]} without concurrently`, object: m[2] });
    // The previous release's statements may be planned on it (a sweep that scans the table without
    // it): only a contract step drops one, after the release that stopped needing it shipped. An
    // index the migration builds itself (dropped first, a failed attempt's leftover) is its own.
    if (!indexes.has(m[2])) findings.push({ kind: 'destructive', what: `drop index ${m[2]}`, object: m[2] });
  }
  for (const m of sql.matchAll(new RegExp(`alter table (?:if exists )?(?:only )?${NAME} ([^;]*)`, 'g'))) {
    const [table, rest] = [m[1], m[2]];
    if (!existingBig(table)) continue;
    if (/add (?:constraint \S+ )?(?:check|foreign key)\b/.test(rest) && !/not valid/.test(rest)) {
      findings.push({ kind: 'blocking', what: `add a check or foreign key to existing table ${table} without not valid (scans it under lock)`, object: table });
    }
    if (/add (?:constraint \S+ )?(?:unique|primary key)\b/.test(rest) && !/using index/.test(rest)) {
      findings.push({ kind: 'blocking', what: `add a unique or primary key constraint to existing table ${table} without using index`, object: table });
    }
  }
  // (a trigger's event, `after truncate on t` or `insert or truncate on t`, truncates nothing)
  for (const m of sql.matchAll(new RegExp(`(?<!(?:after|before|or) )\\b(truncate(?: table)?|vacuum full|cluster) ${NAME}`, 'g'))) {
    findings.push({ kind: 'blocking', what: `${m[1]} ${m[2]}`, object: m[2] });
  }
  // `lock [table] [only] a, [only] b … [in … mode] [nowait]`: every table it names
  for (const m of sql.matchAll(/\block (?:table )?([^;]*?)(?: in [a-z ]+ mode)?(?: nowait)?(?:;|$)/g)) {
    for (const name of m[1].split(',').map((n) => n.trim().replace(/^only /, '').replace(/"/g, ''))) {
      // A configuration table locked first, so that a step which must lock it with a traffic table
      // (dropping a foreign key locks the referencing table, then the referenced one) takes them in the
      // order the service's statements do, and cannot deadlock with them; it waits no longer than any
      // statement (lock_timeout), and scans nothing.
      if (!SMALL_TABLES.has(name)) findings.push({ kind: 'blocking', what: `lock table ${name}`, object: name });
    }
  }
  if (/\bconcurrently\b/.test(sql) && !/istransactional\s*\(\s*\)\s*(?::\s*boolean\s*)?\{\s*return false/i.test(source.replace(/\s+/g, ' '))) {
    findings.push({ kind: 'blocking', what: 'concurrently in a transactional migration (override isTransactional() to return false)' });
  }
  return findings;
}

/** The expand migration a contract step names, or null. */
export function contractOf(source: string): string | null {
  return CONTRACT_MARKER.exec(source)?.[1] ?? null;
}
