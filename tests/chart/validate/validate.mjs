// Validates rendered Kubernetes objects two ways:
//  1. kubernetes-models: each object against the Kubernetes OpenAPI schema of its kind
//     (types, formats, required fields, enums);
//  2. kubernetes-types + the TypeScript compiler: each object written as an object literal
//     typed with its kind's interface, so excess-property checks reject unknown fields
//     (which a real API server drops with only a warning: a misspelt security setting
//     would silently do nothing).
//
// usage: node validate.mjs RENDER.json...   (each file is `chartrender --output json`)
// Prints one line per problem and a summary; exits 1 when anything is invalid, 2 on bad
// input.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const ts = require("typescript");
const typesRoot = dirname(require.resolve("kubernetes-types/package.json"));

const maxInputBytes = 64 << 20;

function loadRenders(paths) {
  const renders = [];
  for (const path of paths) {
    const text = readFileSync(path, "utf8");
    if (text.length > maxInputBytes) throw new Error(`${path}: larger than ${maxInputBytes} bytes`);
    const parsed = JSON.parse(text);
    if (!parsed || !Array.isArray(parsed.manifests)) {
      throw new Error(`${path}: no "manifests" array (is it chartrender --output json?)`);
    }
    renders.push({ name: basename(path, ".json"), manifests: parsed.manifests });
  }
  return renders;
}

function splitApiVersion(apiVersion) {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? { group: "", version: apiVersion } : {
    group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1),
  };
}

// 1. kubernetes-models.
async function validateWithModels(where, object) {
  const { apiVersion, kind } = object;
  let module;
  try {
    module = await import(`kubernetes-models/${apiVersion}/${kind}`);
  } catch (error) {
    return [`${where}: kubernetes-models has no ${apiVersion} ${kind}`];
  }
  const Model = module[kind];
  if (typeof Model !== "function") return [`${where}: kubernetes-models has no class ${kind}`];
  try {
    new Model(object).validate();
    return [];
  } catch (error) {
    return [`${where}: ${error.message}`];
  }
}

// kubernetes-types 1.30 lost `resources` and `scope` from NamedRuleWithOperations (an
// admission policy's matchConstraints.resourceRules), which every real policy needs; the
// strict check sees the object without them, and kubernetes-models (step 1) still checks them.
function typedView(object) {
  if (object.apiVersion !== "admissionregistration.k8s.io/v1" ||
      object.kind !== "ValidatingAdmissionPolicy") {
    return object;
  }
  const copy = structuredClone(object);
  for (const rule of copy.spec?.matchConstraints?.resourceRules ?? []) {
    delete rule.resources;
    delete rule.scope;
  }
  return copy;
}

// 2. kubernetes-types + tsc: one program for every object of every render.
function validateWithTypes(entries) {
  const directory = mkdtempSync(join(tmpdir(), "chart-validate-"));
  try {
    const lines = [];
    const owners = []; // [first line, last line, where] per object, 0-based lines
    const imports = new Map();
    entries.forEach(({ where, object }, index) => {
      const { group, version } = splitApiVersion(object.apiVersion);
      const groupDirectory = group === "" ? "core" : group.split(".")[0];
      const module = join(typesRoot, groupDirectory, version);
      const alias = `${object.kind}_${groupDirectory}_${version}`.replace(/[^A-Za-z0-9_]/g, "_");
      imports.set(alias, `import type { ${object.kind} as ${alias} } from ${JSON.stringify(module)};`);
      const body = JSON.stringify(typedView(object), null, 2).split("\n");
      body[0] = `export const object${index}: ${alias} = ${body[0]}`;
      body[body.length - 1] += ";";
      owners.push([lines.length, lines.length + body.length - 1, where]);
      lines.push(...body);
    });
    const header = [...imports.values()];
    const source = join(directory, "objects.ts");
    writeFileSync(source, [...header, ...lines].join("\n") + "\n");
    const program = ts.createProgram([source], {
      noEmit: true, strict: true, target: ts.ScriptTarget.ES2020,
      module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Node10,
      types: [], skipLibCheck: true,
    });
    const problems = [];
    for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, " ");
      if (!diagnostic.file) {
        problems.push(`tsc: ${message}`);
        continue;
      }
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      const bodyLine = line - header.length;
      const owner = owners.find(([first, last]) => bodyLine >= first && bodyLine <= last);
      const text = diagnostic.file.text.split("\n")[line].trim();
      problems.push(`${owner ? owner[2] : "objects.ts"}: TS${diagnostic.code} ${message} (at ${text})`);
    }
    return problems;
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

async function main(paths) {
  if (paths.length === 0) {
    console.error("usage: node validate.mjs RENDER.json...");
    return 2;
  }
  let renders;
  try {
    renders = loadRenders(paths);
  } catch (error) {
    console.error(`validate: ${error.message}`);
    return 2;
  }
  const entries = [];
  for (const render of renders) {
    for (const { source, object } of render.manifests) {
      const where = `${render.name} ${source} ${object.kind}/${object.metadata?.name}`;
      entries.push({ where, object });
    }
  }
  const problems = [];
  for (const { where, object } of entries) problems.push(...await validateWithModels(where, object));
  problems.push(...validateWithTypes(entries));
  for (const problem of problems) console.log(problem);
  console.log(`${entries.length} objects in ${renders.length} renders: ` +
    (problems.length === 0 ? "all valid (kubernetes-models, kubernetes-types strict)" :
      `${problems.length} problems`));
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
