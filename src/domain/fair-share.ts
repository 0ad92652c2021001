// Shared bounds shared fairly (2026-11-29, issue 36): when a bound shared by every client is
// full (the server's connections, the places in the queue of password checks), a newcomer whose
// owner (an address, an account) holds fewer places than the owner holding the most takes one
// of that owner's places, instead of being refused. So a few addresses cannot hold the whole
// bound: N owners end with an even share each, and a newcomer gets in while it holds less.

/**
 * Whether a newcomer whose owner holds `mine` places of a full bound takes one from the owner
 * holding the most (`largest`): only when, after the swap, it holds no more than that owner is
 * left with, so places move towards an even share and never go back and forth between equals.
 */
export function takesPlace(mine: number, largest: number): boolean {
  return mine + 1 < largest;
}
