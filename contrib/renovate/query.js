// Evaluates the preset's JSONata queries as Renovate does: the custom manager's matchStrings
// over murmur.yaml (already parsed to JSON: Renovate parses fileFormat yaml the same way), and
// the custom datasource's transformTemplates over murmur-index.json, with {{packageName}} filled
// in as Renovate's templating does. Prints {"deps": [...], "releases": {name: [...]}}.
// Usage: node query.js PRESET.json MURMUR.json INDEX.json
const fs = require("fs");
const jsonata = require("jsonata");

async function main() {
  const [presetPath, manifestPath, indexPath] = process.argv.slice(2);
  const preset = JSON.parse(fs.readFileSync(presetPath, "utf8"));
  const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  const index = JSON.parse(fs.readFileSync(indexPath, "utf8"));
  const deps = [];
  for (const m of preset.customManagers) {
    for (const q of m.matchStrings) {
      let got = await jsonata(q).evaluate(manifest);
      if (got === undefined) continue;
      if (!Array.isArray(got)) got = [got];
      deps.push(...got);
    }
  }
  const releases = {};
  for (const d of deps) {
    let data = index;
    for (const t of preset.customDatasources.murmur.transformTemplates) {
      data = await jsonata(t.split("{{packageName}}").join(d.packageName)).evaluate(data);
    }
    releases[d.packageName] = data.releases;
  }
  process.stdout.write(JSON.stringify({ deps, releases }));
}

main().catch((e) => {
  process.stderr.write(String(e && e.message ? e.message : e) + "\n");
  process.exit(1);
});
