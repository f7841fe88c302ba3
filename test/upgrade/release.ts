import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The repository's root (this tree's sources), above `dist/`. */
export const SOURCE_ROOT = path.resolve(__dirname, '../../..');
const MIGRATIONS_DIR = 'src/db/migrations';

export function git(args: string[], cwd = SOURCE_ROOT): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).trim();
}

/**
 * The release this tree replaces: `UPGRADE_FROM` (any commit-ish) or, by default, the newest commit
 * on the first-parent history whose `src/db/migrations` differs from this tree's (its working copy),
 * i.e. the schema this release migrates from.
 */
export function previousRelease(): string {
  if (process.env.UPGRADE_FROM) return git(['rev-parse', '--verify', `${process.env.UPGRADE_FROM}^{commit}`]);
  for (const commit of git(['rev-list', '--first-parent', 'HEAD']).split('\n')) {
    try {
      execFileSync('git', ['diff', '--quiet', commit, '--', MIGRATIONS_DIR], { cwd: SOURCE_ROOT });
    } catch {
      return commit;
    }
  }
  throw new Error('no commit in this history has other migrations than this tree: nothing to upgrade from');
}

/** Migration names (Migration<timestamp>_<name>) in this tree, oldest first. */
export function migrationsHere(): string[] {
  return readdirSync(path.join(SOURCE_ROOT, MIGRATIONS_DIR))
    .filter((f) => /^Migration\d{14}_\w+\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, '')).sort();
}

export function migrationSource(name: string): string {
  return readFileSync(path.join(SOURCE_ROOT, MIGRATIONS_DIR, `${name}.ts`), 'utf8');
}

/** Migration names at a commit, oldest first. */
export function migrationsAt(commit: string): string[] {
  return git(['ls-tree', '--name-only', `${commit}:${MIGRATIONS_DIR}`]).split('\n')
    .filter((f) => /^Migration\d{14}_\w+\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, '')).sort();
}

/** Whether the release at `commit` names `word` anywhere in its code outside the migrations. */
export function releaseUses(commit: string, word: string): boolean {
  try {
    git(['grep', '-q', '-w', '-i', '-e', word, commit, '--', 'src', 'workers', 'config', `:(exclude)${MIGRATIONS_DIR}`]);
    return true;
  } catch {
    return false;
  }
}
