// A stock @ag-ui/client HttpAgent against the gateway: node agui_client.cjs <plan.json>.
// The plan: {"url", "token", "threadId", "forwardedProps", "runs": [{"runId", "message"?, "answer"?}]}; a run
// with "answer" resumes every pending interrupt with that payload (status "resolved").
// Prints one JSON object: {"runs": [{"events", "error", "status", "messages", "interrupts"}]},
// "messages" being the agent's messages after the run (what a front end renders).
const fs = require("node:fs");
const { HttpAgent } = require("@ag-ui/client");

async function main() {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const agent = new HttpAgent({
    url: plan.url, threadId: plan.threadId, headers: { Authorization: `Bearer ${plan.token}` },
  });
  const runs = [];
  for (const step of plan.runs) {
    if (step.message !== undefined) {
      agent.addMessage({ id: `user-${step.runId}`, role: "user", content: step.message });
    }
    const resume = step.answer === undefined ? undefined
      : agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: step.answer }));
    const events = [];
    let error = null;
    let status = null;
    try {
      await agent.runAgent(
        { runId: step.runId, forwardedProps: plan.forwardedProps, ...(resume ? { resume } : {}) },
        { onEvent: ({ event }) => { events.push(event); } },
      );
    } catch (err) {
      error = String(err && err.message ? err.message : err);
      status = err && err.status !== undefined ? err.status : null;
    }
    runs.push({
      events, error, status,
      messages: JSON.parse(JSON.stringify(agent.messages)),
      interrupts: JSON.parse(JSON.stringify(agent.pendingInterrupts)),
    });
  }
  process.stdout.write(JSON.stringify({ runs }));
}

main().catch((err) => { process.stderr.write(String(err && err.stack ? err.stack : err)); process.exit(1); });
