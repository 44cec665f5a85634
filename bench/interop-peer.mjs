// One step of the interop check with node-redlock (npm "redlock"): acquire
// a resource and print its value, or try to and report that it is held.
//   node interop-peer.mjs --nodes host:port,... acquire RESOURCE   -> prints the lock value, holds it
//   node interop-peer.mjs --nodes host:port,... try RESOURCE       -> exit 0 if acquired, 75 if refused
// "acquire" keeps the lock until stdin closes, then releases it.
import Redis from "ioredis";
import Redlock from "redlock";

const args = process.argv.slice(2);
const nodes = args[args.indexOf("--nodes") + 1].split(",");
const [cmd, resource] = args.slice(args.indexOf("--nodes") + 2);
const clients = nodes.map((n) => {
  const [host, port] = n.split(":");
  return new Redis({ host, port: Number(port), lazyConnect: false });
});
const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
redlock.on("error", () => {}); // a refused vote is the expected outcome of "try"

let code = 0;
try {
  const lock = await redlock.acquire([resource], 10000);
  if (cmd === "acquire") {
    console.log(lock.value);
    await new Promise((r) => process.stdin.on("end", r).resume());
  }
  await lock.release();
} catch (e) {
  if (cmd === "acquire") {
    console.error(`node-redlock could not acquire ${resource}: ${e.message}`);
    code = 1;
  } else {
    code = 75;
  }
}
for (const c of clients) c.disconnect();
process.exit(code);
