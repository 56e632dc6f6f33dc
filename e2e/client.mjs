// End to end through the official TypeScript MCP SDK. Over Streamable HTTP,
// with the demo's development agent token: the SDK's own helpers discover
// the protected-resource metadata (RFC 9728) from the 401 challenge, then
// an order is read, a governed cancellation is staged, a person approves it
// with the CLI, the agent polls it to completion, and the audit log
// verifies. What each caller is told besides its tools — instructions,
// resources, prompts, capabilities — is read over both doors. Over stdio,
// the development identity's catalog is listed, and a subscription to an
// approval hears of a decision the HTTP server's process made. Over both,
// an unknown method is the JSON-RPC error -32601 the SDK reads. The
// example's create_return_label calls the carrier the demo serves: staged
// by the agent, approved by a person, executed by the agent's poll, its
// attempt and success found in the audit log with sql_query; the calls the
// demo prints for it run exactly as printed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { discoverOAuthProtectedResourceMetadata, extractResourceMetadataUrl, discoverAuthorizationServerMetadata } from "@modelcontextprotocol/sdk/client/auth.js";
import { EmptyResultSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

// unknownMethod asks a client's server for a method it does not serve: the
// SDK must read the answer as a JSON-RPC error, -32601 with its stable code.
async function unknownMethod(c, over) {
  try {
    await c.request({ method: "no/such/method", params: {} }, EmptyResultSchema);
    check(false, `an unknown method over ${over} is refused`, {});
  } catch (e) {
    check(e?.code === -32601 && e?.data?.code === "X_MCP_METHOD_UNKNOWN", `an unknown method over ${over} is JSON-RPC -32601`,
      { code: e?.code, message: e?.message, data: e?.data });
  }
}

function check(ok, what, detail) {
  if (!ok) {
    console.error(`e2e: FAIL: ${what}\n${JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
  console.log(`e2e: ok: ${what}`);
}

const facts = JSON.parse(readFileSync(process.env.DEMO_FACTS, "utf8"));
const mcpURL = new URL(facts.mcp_url);
const token = facts.tokens.agent.acme;

// RFC 9728 discovery, as a client without a token finds it.
const challenge = await fetch(mcpURL, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
const metadataURL = extractResourceMetadataUrl(challenge);
check(challenge.status === 401 && metadataURL?.href === `${mcpURL.origin}/.well-known/oauth-protected-resource/mcp`,
  "a 401 names the resource metadata", { status: challenge.status, header: challenge.headers.get("www-authenticate") });
const resource = await discoverOAuthProtectedResourceMetadata(mcpURL, { resourceMetadataUrl: metadataURL });
check(resource.resource === mcpURL.href && resource.authorization_servers?.[0] === facts.issuer, "protected-resource metadata", resource);
const issuer = await discoverAuthorizationServerMetadata(resource.authorization_servers[0]);
check(issuer?.issuer === facts.issuer, "the authorization server's metadata", issuer);

const client = new Client({ name: "orangerail-e2e", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(mcpURL, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(["order_get", "order_list", "cancel_order", "check_approval"].every((n) => names.includes(n)), "tools/list over HTTP", names);
await unknownMethod(client, "HTTP");

// The describe tools: the SDK checks each answer against its tool's output
// schema; a hidden object answers as one that does not exist.
check(["describe_object", "describe_action", "list_policies", "errors_explain"].every((n) => names.includes(n)), "the describe tools are listed", names);
const order = await client.callTool({ name: "describe_object", arguments: { object: "order" } });
check(!order.isError && order.structuredContent?.key === "id"
  && order.structuredContent?.fields?.find((f) => f.name === "created_at")?.type === "timestamptz", "describe_object order", order.structuredContent);
const cancelDescribed = await client.callTool({ name: "describe_action", arguments: { action: "cancel_order" } });
check(!cancelDescribed.isError && cancelDescribed.structuredContent?.policy?.approval?.required === true
  && !JSON.stringify(cancelDescribed).includes("UPDATE orders"), "describe_action cancel_order, without its SQL", cancelDescribed.structuredContent);
const policies = await client.callTool({ name: "list_policies", arguments: {} });
check(!policies.isError && policies.structuredContent?.policies?.some((p) => p.action === "cancel_order"), "list_policies", policies.structuredContent);
const explained = await client.callTool({ name: "errors_explain", arguments: { code: "X_FORBIDDEN" } });
check(!explained.isError && explained.structuredContent?.fix?.includes("describe_action"), "errors_explain gives the agent's fix", explained.structuredContent);
const unknownCode = await client.callTool({ name: "errors_explain", arguments: { code: "X_NO_SUCH_CODE" } });
check(unknownCode.isError && unknownCode.content?.some((c) => c.text?.includes('"path":"/code"')), "errors_explain refuses an unknown code at /code", unknownCode);

// What the agent is told before its first call.
const caps = client.getServerCapabilities();
check(caps.tools && !caps.tools.listChanged && caps.resources && !caps.resources.subscribe && caps.prompts && caps.logging,
  "capabilities over HTTP: exactly what is served", caps);
const told = client.getInstructions() ?? "";
check(told.includes("need a person's approval: cancel_order") && told.includes("check_approval"), "instructions name the governed actions", told);
const listed = (await client.listResources()).resources.map((r) => r.uri);
check(listed.includes("orangerail://ontology") && listed.includes("orangerail://objects/order"), "resources/list", listed);
const onto = JSON.parse((await client.readResource({ uri: "orangerail://ontology" })).contents[0].text);
check(onto.actions?.cancel_order?.approval === "required" && !JSON.stringify(onto).includes("UPDATE orders"), "the ontology resource", onto);
const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
check(prompts.includes("request_cancellation"), "prompts/list", prompts);
const prompt = await client.getPrompt({ name: "request_cancellation", arguments: { order_id: "o-1002", reason: "moved" } });
check(prompt.messages[0]?.content?.text?.startsWith("A customer asked to cancel order o-1002 because: moved."), "prompts/get renders", prompt);

const read = await client.callTool({ name: "order_get", arguments: { id: "o-1002" } });
check(!read.isError && read.structuredContent?.item?.status === "pending", "order_get reads o-1002", read);

const staged = await client.callTool({ name: "cancel_order", arguments: { order_id: "o-1002", reason: "end to end" } });
const id = staged.structuredContent?.approvalId;
check(staged.structuredContent?.status === "approval_pending" && id, "cancel_order stages an approval", staged);

const pending = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(pending.structuredContent?.status === "pending", "check_approval before the decision", pending);
const approvalDoc = JSON.parse((await client.readResource({ uri: `orangerail://approvals/${id}` })).contents[0].text);
check(approvalDoc.status === "pending" && approvalDoc.action === "cancel_order", "the approval resource", approvalDoc);

// A person decides through the deployment's API with their own token.
const asApprover = { env: { ...process.env, ORANGERAIL_TOKEN: facts.tokens.approver.acme } };
const common = ["--server", facts.server_url];
const view = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", id, "--json", ...common], asApprover));
check(view.digest?.length === 64 && view.input?.reason === "end to end", "approvals show", view);
execFileSync(facts.orangerail, ["approvals", "approve", id, "--digest", view.digest, ...common], asApprover);

const done = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(!done.isError && done.structuredContent?.status === "executed", "check_approval executes the approved call", done);
const again = await client.callTool({ name: "check_approval", arguments: { approvalId: id } });
check(again.structuredContent?.status === "consumed", "a re-poll reports consumed", again);
const after = await client.callTool({ name: "order_get", arguments: { id: "o-1002" } });
check(after.structuredContent?.item?.status === "cancelled", "the order is cancelled", after);
await client.close();

// An auditor reads the audit log with read-only SQL; a write is refused.
const auditor = new Client({ name: "orangerail-e2e-auditor", version: "1.0.0" });
await auditor.connect(new StreamableHTTPClientTransport(mcpURL, { requestInit: { headers: { Authorization: `Bearer ${facts.tokens.auditor.acme}` } } }));
// Listing the tools has the SDK validate each answer's structured content
// against the output schema sql_query advertises.
const sqlTool = (await auditor.listTools()).tools.find((t) => t.name === "sql_query");
check(sqlTool?.outputSchema?.required?.includes("columns") && sqlTool?.description?.includes("orangerail.audit(tenant_id text, seq int8"),
  "sql_query lists what it may read and its output schema", sqlTool);
const audited = await auditor.callTool({ name: "sql_query", arguments: { sql: "SELECT phase, seq, at, hash FROM audit ORDER BY seq" } });
const [first] = audited.structuredContent?.rows ?? [];
check(!audited.isError && audited.structuredContent?.rows?.map((r) => r[0]).join(",") === "staged,approved,execution_started,execution_succeeded"
  && audited.structuredContent?.columns?.map((c) => `${c.name} ${c.type}`).join(",") === "phase text,seq int8,at timestamptz,hash bytea"
  && first?.[1] === 1 && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/.test(first?.[2]) && /^[0-9a-f]{64}$/.test(first?.[3])
  && audited.structuredContent?.guards?.join(",") === "role,transaction,parse,catalog,limits", "sql_query reads the audit log, values by type", audited.structuredContent);
const write = await auditor.callTool({ name: "sql_query", arguments: { sql: "WITH d AS (DELETE FROM audit RETURNING 1) SELECT * FROM d" } });
const refusal = JSON.parse(write.content?.[1]?.text ?? "{}"); // a refusal travels as text: the message, then its body
check(write.isError && !write.structuredContent && refusal.code === "X_MCP_QUERY_REJECTED" && refusal.rule === "no_modifying",
  "sql_query refuses a data-modifying CTE", write);
const auditorTold = auditor.getInstructions() ?? "";
check(!auditorTold.includes("cancel_order") && auditorTold.includes("sql_query"), "the auditor's instructions name only what it sees", auditorTold);
const auditorPrompts = (await auditor.listPrompts()).prompts;
check(auditorPrompts.length === 0, "the auditor is offered no prompt", auditorPrompts);
await auditor.close();

// A return label: the demo's carrier, through the governed http action.
const carrierDoc = await fetch(`${facts.carrier_url}/openapi.json`).then((r) => r.json());
check(carrierDoc.openapi === "3.1.0" && carrierDoc.paths?.["/labels"]?.post, "the demo's carrier serves its OpenAPI document", carrierDoc.info);
const unkeyed = await fetch(`${facts.carrier_url}/labels`, { method: "POST", headers: { "content-type": "application/json" },
  body: JSON.stringify({ order_id: "o-1003", reason: "no key", weight_grams: 100 }) });
check(unkeyed.status === 401, "the carrier refuses a call without its API key", { status: unkeyed.status });
const shipper = new Client({ name: "orangerail-e2e-shipper", version: "1.0.0" });
await shipper.connect(new StreamableHTTPClientTransport(mcpURL, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
const labelStaged = await shipper.callTool({ name: "create_return_label", arguments: { order_id: "o-1003", reason: "arrived damaged", weight_grams: 1200 } });
const labelID = labelStaged.structuredContent?.approvalId;
check(labelStaged.structuredContent?.status === "approval_pending" && labelID, "create_return_label stages an approval", labelStaged);
const labelView = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", labelID, "--json", ...common], asApprover));
check(labelView.input?.weight_grams === 1200 && labelView.effect?.includes("prepaid return label") && labelView.rollback?.includes("Void the label"),
  "approvals show gives the approver the label's effect and rollback", labelView);
const labelEarly = await shipper.callTool({ name: "check_approval", arguments: { approvalId: labelID } });
check(labelEarly.structuredContent?.status === "pending", "check_approval before the label's decision", labelEarly);
execFileSync(facts.orangerail, ["approvals", "approve", labelID, "--digest", labelView.digest, ...common], asApprover);
const labelDone = await shipper.callTool({ name: "check_approval", arguments: { approvalId: labelID } });
const label = labelDone.structuredContent?.result?.body;
check(!labelDone.isError && labelDone.structuredContent?.status === "executed" && labelDone.structuredContent?.result?.status === 201
  && /^lbl_[0-9a-f]{16}$/.test(label?.id) && /^1ZOR[0-9A-F]{14}$/.test(label?.tracking_number)
  && label?.label_url === `${facts.carrier_url}/labels/${label.id}/pdf` && label?.order_id === "o-1003",
  "check_approval calls the carrier and returns the label", labelDone.structuredContent);
const labelAgain = await shipper.callTool({ name: "check_approval", arguments: { approvalId: labelID } });
check(labelAgain.structuredContent?.status === "consumed", "a re-poll of the label reports consumed, and calls nothing", labelAgain.structuredContent);
await shipper.close();

// The calls the demo printed for it, run exactly as printed (the poll with
// the approvalId the first answered in place of ID).
const printed = readFileSync(process.env.DEMO_OUT, "utf8").split("\n");
const lineAfter = (heading) => printed[printed.findIndex((l) => l.startsWith(heading)) + 1]?.trim() ?? "";
const stageLine = lineAfter("An agent of acme asks for a return label");
const pollLine = lineAfter("Once a person has approved its approvalId");
check(stageLine.startsWith("curl ") && pollLine.includes('"approvalId":"ID"'), "the demo prints the agent's calls of create_return_label", { stageLine, pollLine });
const sh = (line) => JSON.parse(execFileSync("bash", ["-c", line], { encoding: "utf8" }));
const printedStage = sh(stageLine).result?.structuredContent;
check(printedStage?.status === "approval_pending" && printedStage?.approvalId, "the printed create_return_label call stages", printedStage);
const printedView = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", printedStage.approvalId, "--json", ...common], asApprover));
execFileSync(facts.orangerail, ["approvals", "approve", printedStage.approvalId, "--digest", printedView.digest, ...common], asApprover);
const printedPoll = sh(pollLine.replace('"approvalId":"ID"', `"approvalId":"${printedStage.approvalId}"`)).result?.structuredContent;
check(printedPoll?.status === "executed" && printedPoll?.result?.body?.id && printedPoll.result.body.id !== label.id,
  "the printed check_approval call executes it: a second label", printedPoll);

// The stdio command the demo printed, run exactly as printed, reaches the
// same carrier: a label staged over stdio and approved is made. Its
// environment is the printed line's alone: the key is not inherited.
const stdioLine = lineAfter("Or connect over stdio as a development identity");
const { SHIPPING_KEY_CREDENTIAL: _inherited, ...withoutKey } = process.env;
const printedStdio = new Client({ name: "orangerail-e2e-stdio-shipper", version: "1.0.0" });
await printedStdio.connect(new StdioClientTransport({ command: "bash", args: ["-c", stdioLine], env: withoutKey, stderr: "ignore" }));
const stdioLabel = await printedStdio.callTool({ name: "create_return_label", arguments: { order_id: "o-1003", reason: "lost in transit", weight_grams: 800 } });
const stdioLabelID = stdioLabel.structuredContent?.approvalId;
check(stdioLabel.structuredContent?.status === "approval_pending" && stdioLabelID, "the printed stdio command stages create_return_label", stdioLabel);
const stdioLabelView = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", stdioLabelID, "--json", ...common], asApprover));
execFileSync(facts.orangerail, ["approvals", "approve", stdioLabelID, "--digest", stdioLabelView.digest, ...common], asApprover);
const stdioLabelDone = (await printedStdio.callTool({ name: "check_approval", arguments: { approvalId: stdioLabelID } })).structuredContent;
check(stdioLabelDone?.status === "executed" && stdioLabelDone?.result?.status === 201 && /^lbl_[0-9a-f]{16}$/.test(stdioLabelDone?.result?.body?.id),
  "the printed stdio command's check_approval calls the demo's carrier", stdioLabelDone);
await printedStdio.close();

// The auditor finds each label's attempt and success in the audit log.
const labelAuditor = new Client({ name: "orangerail-e2e-auditor", version: "1.0.0" });
await labelAuditor.connect(new StreamableHTTPClientTransport(mcpURL, { requestInit: { headers: { Authorization: `Bearer ${facts.tokens.auditor.acme}` } } }));
const labelAudit = await labelAuditor.callTool({ name: "sql_query", arguments: {
  sql: `SELECT phase, convert_from(entry, 'UTF8') FROM audit WHERE approval_id = '${labelID}' ORDER BY seq` } });
const labelRows = labelAudit.structuredContent?.rows ?? [];
const attempt = JSON.parse(labelRows.find((r) => r[0] === "effect_attempt")?.[1] ?? "{}");
check(!labelAudit.isError && labelRows.map((r) => r[0]).join(",") === "staged,approved,execution_started,effect_attempt,execution_succeeded"
  && JSON.stringify(attempt).includes('"status":201') && labelRows.find((r) => r[0] === "execution_succeeded")?.[1]?.includes(label.id),
  "sql_query finds the label's effect_attempt and execution_succeeded", labelAudit.structuredContent);
await labelAuditor.close();

// A forged token is refused.
const forged = new Client({ name: "orangerail-e2e", version: "1.0.0" });
let refused = false;
try {
  await forged.connect(new StreamableHTTPClientTransport(mcpURL, { requestInit: { headers: { Authorization: `Bearer ${token.slice(0, -4)}AAAA` } } }));
} catch {
  refused = true;
}
check(refused, "a token with a broken signature is refused", {});

// Over stdio, the development identity.
const [command, ...args] = facts.stdio_command;
const local = new Client({ name: "orangerail-e2e", version: "1.0.0" });
await local.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const stdioTools = (await local.listTools()).tools.map((t) => t.name);
check(stdioTools.includes("cancel_order"), "tools/list over stdio", stdioTools);
await unknownMethod(local, "stdio");
check(local.getServerCapabilities()?.resources?.subscribe === true, "resources are subscribable over stdio", local.getServerCapabilities());
// A subscription hears of a decision another process (the HTTP server,
// through its API) makes: the stdio server polls what is subscribed.
const updated = new Promise((resolve) => local.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)));
const stdioStaged = await local.callTool({ name: "update_shipping_address", arguments: { order_id: "o-1001", address: "2 Subscriber Street" } });
const stdioID = stdioStaged.structuredContent?.approvalId;
check(stdioStaged.structuredContent?.status === "approval_pending" && stdioID, "update_shipping_address stages over stdio", stdioStaged);
await local.subscribeResource({ uri: `orangerail://approvals/${stdioID}` });
const stdioView = JSON.parse(execFileSync(facts.orangerail, ["approvals", "show", stdioID, "--json", ...common], asApprover));
execFileSync(facts.orangerail, ["approvals", "approve", stdioID, "--digest", stdioView.digest, ...common], asApprover);
const notified = await Promise.race([updated, new Promise((resolve) => setTimeout(() => resolve("timeout"), 15000))]);
check(notified === `orangerail://approvals/${stdioID}`, "a subscribed approval's decision is notified over stdio", notified);
const stdioDoc = JSON.parse((await local.readResource({ uri: `orangerail://approvals/${stdioID}` })).contents[0].text);
check(stdioDoc.status === "approved", "the approval reads approved, and reading executed nothing", stdioDoc);
await local.close();

execFileSync(facts.orangerail, ["audit", "verify", "--database-url", facts.database_url], { stdio: "inherit" });
console.log("e2e: ok: audit verify");
