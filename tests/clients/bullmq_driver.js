// Drives the real Node BullMQ for the tests: one JSON command per line on stdin, one JSON reply
// per line on stdout. Run with NODE_PATH at the node_modules scripts/clients installs.
//   {"op": "add", "count": 3, "opts": {"priority": 5}}   -> {"ids": ["1", "2", "3"]}
//   {"op": "worker", "concurrency": 2, "name": "w1"}      -> {"ok": true}: a Worker that holds
//                                                            each job active until released
//   {"op": "release", "count": 1}                         -> {"released": 1}: those jobs complete
//   {"op": "pause"} / {"op": "resume"}                    -> {"ok": true}: Queue.pause / resume
//   {"op": "counts"}                                      -> BullMQ's own getJobCounts
//   {"op": "workers"}                                     -> {"count": n}: Queue.getWorkersCount
//   {"op": "worker", "ms": 40, "concurrency": 1}          -> a Worker whose jobs take 40 ms each
//   {"op": "log"}                                         -> what happened, by this process's
//      clock (ms): added [id, before, after, delay], started {id: ms}, finished {id: ms}
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
const log = { added: [], started: {}, finished: {} };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function handle(command) {
  switch (command.op) {
    case "add": {
      const ids = [];
      for (let i = 0; i < (command.count ?? 1); i++) {
        const before = Date.now();
        const job = await queue.add(command.name ?? "job", { n: i }, command.opts ?? {});
        log.added.push([job.id, before, Date.now(), (command.opts ?? {}).delay ?? 0]);
        ids.push(job.id);
      }
      return { ids };
    }
    case "worker": {
      const hold = () => new Promise((resolve) => held.push(resolve));
      const run = async (job) => {
        log.started[job.id] = Date.now();
        await (command.ms === undefined ? hold() : sleep(command.ms));
        log.finished[job.id] = Date.now();
      };
      const worker = new Worker(
        queueName,
        run,
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
    case "log":
      return log;
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
