// Drives the real Node BullMQ for the tests: one JSON command per line on stdin, one JSON reply
// per line on stdout. Run with NODE_PATH at the node_modules scripts/clients installs.
//   {"op": "add", "count": 3, "opts": {"priority": 5}}   -> {"ids": ["1", "2", "3"]}
//   {"op": "worker", "concurrency": 2, "name": "w1"}      -> {"ok": true}: a Worker that holds
//                                                            each job active until released
//   {"op": "release", "count": 1}                         -> {"released": 1}: those jobs complete
//   {"op": "pause"} / {"op": "resume"}                    -> {"ok": true}: Queue.pause / resume
//   {"op": "counts"}                                      -> BullMQ's own getJobCounts
//   {"op": "workers"}                                     -> {"count": n}: Queue.getWorkersCount
//   {"op": "close"}                                       -> {"ok": true}, then the process exits
// argv: redis URL, queue name, key prefix.
"use strict";
const readline = require("node:readline");
const { Queue, Worker } = require("bullmq");

const [url, queueName, prefix] = process.argv.slice(2);
const parsed = new URL(url);
const connection = {
  host: parsed.hostname,
  port: Number(parsed.port || 6379),
  db: Number(parsed.pathname.slice(1) || 0),
};
const queue = new Queue(queueName, { connection, prefix });
const workers = [];
const held = []; // resolvers of the jobs the workers hold active

async function handle(command) {
  switch (command.op) {
    case "add": {
      const ids = [];
      for (let i = 0; i < (command.count ?? 1); i++) {
        const job = await queue.add(command.name ?? "job", { n: i }, command.opts ?? {});
        ids.push(job.id);
      }
      return { ids };
    }
    case "worker": {
      const worker = new Worker(
        queueName,
        () => new Promise((resolve) => held.push(resolve)),
        { connection, prefix, concurrency: command.concurrency ?? 1, name: command.name },
      );
      await worker.waitUntilReady();
      workers.push(worker);
      return { ok: true };
    }
    case "release": {
      const released = held.splice(0, command.count ?? held.length);
      released.forEach((resolve) => resolve("done"));
      return { released: released.length, held: held.length };
    }
    case "held":
      return { held: held.length };
    case "pause":
      await queue.pause();
      return { ok: true };
    case "resume":
      await queue.resume();
      return { ok: true };
    case "counts":
      return await queue.getJobCounts();
    case "workers":
      return { count: await queue.getWorkersCount() };
    case "close":
      held.splice(0).forEach((resolve) => resolve("done"));
      await Promise.all(workers.map((worker) => worker.close()));
      await queue.close();
      return { ok: true };
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
let chain = Promise.resolve();
lines.on("line", (line) => {
  chain = chain.then(async () => {
    const command = JSON.parse(line);
    let reply;
    try {
      reply = await handle(command);
    } catch (error) {
      reply = { error: String(error) };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
    if (command.op === "close") process.exit(0);
  });
});
