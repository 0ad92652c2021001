// Files the service reads at start (spec, migrations, web page) live in the project tree;
// find it from this module whether it runs from src/ (tsx) or from dist/src/ (compiled).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('project root (package.json) not found');
    dir = parent;
  }
  return dir;
}

export const projectRoot = findRoot();
export const specPath = join(projectRoot, 'openapi.yaml');
export const asyncapiPath = join(projectRoot, 'asyncapi.yaml');
export const migrationsPath = join(projectRoot, 'src', 'adapters', 'sqlite', 'migrations');
export const pgMigrationsPath = join(projectRoot, 'src', 'adapters', 'postgres', 'migrations');
export const publicPath = join(projectRoot, 'src', 'http', 'public');
