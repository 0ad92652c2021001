// drizzle-kit for the PostgreSQL adapter (`npm run db:generate:pg`); drizzle.config.ts is SQLite's.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/adapters/postgres/schema.ts',
  out: './src/adapters/postgres/migrations',
});
