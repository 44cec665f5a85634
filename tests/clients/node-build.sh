#!/usr/bin/env bash
# clients/node ships its compiled dist/ so that `npm install ./clients/node`
# needs no compiler and no network. This checks that dist/ is what the
# sources compile to with the pinned TypeScript (package-lock.json), and that
# the declarations let a TypeScript program use `await using` on a lock.
#   node-build.sh WORKDIR
set -euo pipefail
work=$1
src=$(cd "$(dirname "$0")/../../clients/node" && pwd)
rm -rf "$work"
mkdir -p "$work"
cp -r "$src/src" "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$work/"
cd "$work"
npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log; echo "npm ci failed (the npm registry or cache is needed)"; exit 1; }
npx tsc -p tsconfig.json
if ! diff -r "$src/dist" dist; then
  echo "clients/node/dist differs from what src/ compiles to: run npm run build in clients/node and commit dist/"
  exit 1
fi
# A TypeScript user's `await using`: the lock is released (the leader
# resigns) on leaving the block; a leader is a Lock for storage-guard.
mkdir -p usecheck
cat > usecheck/use.ts <<'TS'
import { Client, Leader, Lock, Reading, StorageGuard } from '../dist/index.js';
export async function work(client: Client): Promise<Lock> {
  await using lock = await client.lock('invoice:42', { waitMs: 10 });
  lock.check();
  return lock;
}
export async function lead(client: Client, store: StorageGuard, signal: AbortSignal): Promise<Leader> {
  await using leader = await client.campaign('scheduler', '10.0.0.7:8080', { waitMs: 10, signal });
  await store.put('schedule', { by: leader.value }, { lock: leader });
  const epoch: number = leader.epoch;
  await leader.proclaim(String(epoch));
  for await (const r of client.watch('scheduler', { signal })) {
    const next: Reading = await client.observe('scheduler', { after: r, waitMs: 1000 });
    if (next.ledBy(leader)) break;
  }
  return leader;
}
TS
npx tsc --noEmit --strict --target ES2022 --module NodeNext --moduleResolution NodeNext \
  --lib ES2022,esnext.disposable --types node usecheck/use.ts
echo "dist/ matches src/; await using type-checks (a lock and a leader)"
