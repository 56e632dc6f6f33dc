// Runs the pinned conformance suite's server scenarios and the Inspector
// CLI's --strict tools/list against URLs run.sh set up, prints one line per
// scenario with the reason of each failure, and exits non-zero unless
// every scenario passes that is listed neither as not applicable nor as an
// expected failure, and every expected failure still fails.
//
// A scenario passes when none of its checks is a FAILURE or a WARNING (the
// suite's own baseline mode judges the same way). The Inspector's run for
// a ROLE is the scenario "inspector-strict/ROLE": it passes when the CLI
// exits 0 and reports no warning and no error.
//
// Usage: node check.mjs --tools DIR --out DIR --conformance URL --inspect ROLE=URL...
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    tools: { type: "string" },
    out: { type: "string" },
    conformance: { type: "string" },
    inspect: { type: "string", multiple: true, default: [] },
  },
});
for (const a of ["tools", "out", "conformance"]) {
  if (!args[a]) {
    console.error(`check.mjs: --${a} is required`);
    process.exit(2);
  }
}

// readList reads "NAME: REASON" lines; # starts a comment line.
function readList(file) {
  const list = new Map();
  const problems = [];
  readFileSync(join(here, file), "utf8").split("\n").forEach((line, i) => {
    line = line.trim();
    if (line === "" || line.startsWith("#")) return;
    const m = /^(\S+):\s+(\S.*)$/.exec(line);
    if (!m) problems.push(`${file}:${i + 1}: want "scenario: reason", got ${JSON.stringify(line)}`);
    else if (list.has(m[1])) problems.push(`${file}:${i + 1}: ${m[1]} is listed twice`);
    else list.set(m[1], m[2]);
  });
  return { list, problems };
}
const na = readList("not-applicable.txt");
const xfail = readList("expected-failures.txt");
const problems = [...na.problems, ...xfail.problems];
for (const name of na.list.keys()) {
  if (xfail.list.has(name)) problems.push(`${name} is in both not-applicable.txt and expected-failures.txt`);
}

const pkg = (name) => JSON.parse(readFileSync(join(args.tools, "node_modules", name, "package.json"), "utf8"));
const conformance = pkg("@modelcontextprotocol/conformance");
const inspector = pkg("@modelcontextprotocol/inspector");

// results: scenario → the reasons it did not pass ([] when it passed).
const results = new Map();

// The suite's server scenarios (pending ones too), each but the not
// applicable run on its own, so that the demo's per-caller rate limit
// (120 reads a minute) sees only the calls that are judged.
const suiteBin = join(args.tools, "node_modules", "@modelcontextprotocol/conformance", conformance.bin.conformance);
const listed = spawnSync(process.execPath, [suiteBin, "list", "--server"], { encoding: "utf8" });
const scenarios = [...(listed.stdout ?? "").matchAll(/^\s+- (\S+) \[/gm)].map((m) => m[1]);
if (listed.status !== 0 || scenarios.length === 0) {
  console.error(`check.mjs: conformance list --server: exit ${listed.status}\n${listed.stderr}`);
  process.exit(1);
}
for (const name of na.list.keys()) {
  if (!scenarios.includes(name)) problems.push(`${name} is in not-applicable.txt but the suite has no such server scenario`);
}
const suiteOut = join(args.out, "suite");
let log = "";
for (const scenario of scenarios.filter((s) => !na.list.has(s))) {
  const run = spawnSync(process.execPath, [suiteBin, "server", "--url", args.conformance, "--scenario", scenario, "-o", suiteOut],
    { encoding: "utf8", timeout: 2 * 60 * 1000, maxBuffer: 64 << 20 });
  log += `${run.stdout}\n${run.stderr}\n`;
  const dir = existsSync(suiteOut) && readdirSync(suiteOut).find((d) => d.startsWith(`server-${scenario}-`) &&
    /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/.test(d.slice(`server-${scenario}-`.length)));
  if (!dir) {
    results.set(scenario, [`left no results (exit ${run.status}${run.error ? `, ${run.error.message}` : ""}): see ${join(args.out, "suite.log")}`]);
    continue;
  }
  let checks;
  try {
    checks = JSON.parse(readFileSync(join(suiteOut, dir, "checks.json"), "utf8"));
  } catch (e) {
    results.set(scenario, [`no readable checks.json: ${e.message}`]);
    continue;
  }
  results.set(scenario, checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING").map((c) =>
    `${c.status} ${c.id}: ${c.errorMessage ?? c.details?.message ?? c.description}` +
    (c.details?.statusCode ? ` (HTTP ${c.details.statusCode}${c.details.body?.error ? ` ${JSON.stringify(c.details.body.error)}` : ""})` : "")));
}
writeFileSync(join(args.out, "suite.log"), log);

// The Inspector CLI, once per role: --strict reports each tool-schema
// portability problem on stderr as a "Warning:" or "Error:" block.
for (const spec of args.inspect) {
  const [role, url] = [spec.slice(0, spec.indexOf("=")), spec.slice(spec.indexOf("=") + 1)];
  // Its catalog and storage go under the results, not the user's home.
  const run = spawnSync(process.execPath,
    [join(args.tools, "node_modules", "@modelcontextprotocol/inspector", inspector.bin["mcp-inspector"]),
      "--cli", url, "--method", "tools/list", "--strict"],
    { encoding: "utf8", timeout: 2 * 60 * 1000, maxBuffer: 64 << 20, env: { ...process.env, HOME: join(args.out, "inspector-home") } });
  writeFileSync(join(args.out, `inspector-${role}.json`), run.stdout ?? "");
  writeFileSync(join(args.out, `inspector-${role}.stderr`), run.stderr ?? "");
  const reasons = [];
  for (const m of (run.stderr ?? "").matchAll(/^(Warning|Error): tool "([^"]+)"\n\s+Path: (\S+)\n\s+Issue: ([^\n]*)/gm)) {
    // The issue's first sentence says it; the rest is in the saved stderr.
    reasons.push(`${m[1]} ${m[2]} ${m[3]}: ${m[4].split(/(?<=\.) /)[0]}`);
  }
  const summary = /(\d+) errors?, (\d+) warnings?/.exec(run.stderr ?? "");
  if (summary && Number(summary[1]) + Number(summary[2]) !== reasons.length) {
    reasons.push(`the CLI counts ${summary[0]} but ${reasons.length} were read: see ${join(args.out, `inspector-${role}.stderr`)}`);
  }
  let listed;
  try {
    listed = JSON.parse(run.stdout).tools?.length;
  } catch {
    listed = undefined;
  }
  if (run.status !== 0 || !(listed > 0)) {
    reasons.push(`the CLI exited ${run.status}${run.error ? ` (${run.error.message})` : ""} listing ${listed} tools: ${(run.stderr ?? "").trim().split("\n").slice(-3).join(" / ")}`);
  }
  results.set(`inspector-strict/${role}`, reasons);
}

// The verdict, one line per scenario.
console.log(`conformance ${conformance.version} (server scenarios) and inspector ${inspector.version} --strict, against the demo:`);
let failed = false;
for (const name of [...results.keys(), ...na.list.keys()].sort()) {
  const reasons = results.get(name);
  if (na.list.has(name)) {
    console.log(`  n/a    ${name}: ${na.list.get(name)}`);
  } else if (xfail.list.has(name) && reasons.length > 0) {
    console.log(`  xfail  ${name}: ${xfail.list.get(name)}`);
    for (const r of reasons) console.log(`           ${r}`);
  } else if (xfail.list.has(name)) {
    failed = true;
    console.log(`  XPASS  ${name}: passes now; remove it from e2e/conformance/expected-failures.txt`);
  } else if (reasons.length > 0) {
    failed = true;
    console.log(`  FAIL   ${name}`);
    for (const r of reasons) console.log(`           ${r}`);
  } else {
    console.log(`  pass   ${name}`);
  }
}
for (const name of xfail.list.keys()) {
  if (!results.has(name)) problems.push(`${name} is in expected-failures.txt but was not run: remove it, or the suite changed`);
}
for (const p of problems) console.log(`  ERROR  ${p}`);
if (failed || problems.length > 0) {
  console.log(`conformance: FAIL (results in ${args.out})`);
  process.exit(1);
}
console.log("conformance: ok");
