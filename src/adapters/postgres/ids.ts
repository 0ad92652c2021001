// Ids as PostgreSQL holds them (int8).

const PG_INT8_MAX = 9223372036854775807n;

/** an id the database can hold: a larger one names no row (int8 would reject it) */
export function inRange(id: number): boolean {
  return Number.isInteger(id) && id >= 0 && BigInt(id) <= PG_INT8_MAX;
}
