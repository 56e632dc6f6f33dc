// End to end through the official TypeScript MCP SDK: the demo's stdio
// command is launched as an MCP host would, an order is read, a governed
// cancellation is staged, a person approves it with the CLI, the agent
// polls it to completion, and the audit log verifies.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

let serverLog = "";

function check(ok, what, detail) {
  if (!ok) {
    console.error(`e2e: FAIL: ${what}\n${JSON.stringify(detail, null, 2)}\nserver log:\n${serverLog}`);
    process.exit(1);
  }
  console.log(`e2e: ok: ${what}`);
}

const facts = JSON.parse(readFileSync(process.env.DEMO_FACTS, "utf8"));
const [command, ...args] = facts.stdio_command;
const client = new Client({ name: "orangerail-e2e", version: "1.0.0" });
const transport = new StdioClientTransport({ command, args, stderr: "pipe" });
transport.stderr?.on("data", (chunk) => { serverLog += chunk; });
await client.connect(transport);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(["order_get", "order_list", "cancel_order", "check_approval"].every((n) => names.includes(n)), "tools/list", names);

const read = await client.callTool({ name: "order_get", arguments: { id: "o-1002" } });
check(!read.isError && read.structuredContent?.item?.status === "pending", "order_get reads o-1002", read);

const staged = await client.callTool({ name: "cancel_order", arguments: { order_id: "o-1002", reason: "end to end" } });
const id = staged.structuredContent?.approvalId;
check(staged.structuredContent?.status === "approval_pending" && id, "cancel_order stages an approval", staged);

const pending = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(pending.structuredContent?.status === "pending", "check_approval before the decision", pending);

const common = ["--tenant", "acme", "--config", facts.config, "--database-url", facts.database_url];
const view = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", id, "--json", ...common]));
check(view.digest?.length === 64 && view.input?.reason === "end to end", "approvals show", view);
execFileSync(facts.orangerail, ["approvals", "approve", id, "--as", "e2e-approver", "--digest", view.digest, ...common]);

const done = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(!done.isError && done.structuredContent?.status === "executed", "check_approval executes the approved call", done);
const again = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(again.structuredContent?.status === "consumed", "a re-poll reports consumed", again);

const after = await client.callTool({ name: "order_get", arguments: { id: "o-1002" } });
check(after.structuredContent?.item?.status === "cancelled", "the order is cancelled", after);
await client.close();

execFileSync(facts.orangerail, ["audit", "verify", "--database-url", facts.database_url], { stdio: "inherit" });
console.log("e2e: ok: audit verify");
